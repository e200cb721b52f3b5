-- Underground (§4.15): per-agent wallets, events (§2 "Underground event") and royalty splits
-- (§2 "Royalty split"). Every table carries both agent_id and user_id and references agents by the
-- pair (the 060 pattern), so no code path can file a row for user A under user B's agent, and
-- row-level security on user_id then also covers the agent.

-- One key pair per agent. The private key is sealed with WALLET_ENCRYPTION_KEY (src/lib/crypto.ts
-- 'v1.' format; the CHECK rejects anything else, so a path that forgot to encrypt fails loudly) and
-- is never returned by the API. The primary key on agent_id makes "one wallet per agent" a database
-- invariant: concurrent creates race on it and all agree on the winner's address. The bus
-- (POST /api/underground/bus/send) verifies message signatures against `address`.
CREATE TABLE underground_agent_wallets (
  agent_id text PRIMARY KEY,
  user_id uuid NOT NULL,
  address text NOT NULL UNIQUE CHECK (address ~ '^0x[0-9a-fA-F]{40}$'),
  private_key_enc text NOT NULL CHECK (private_key_enc LIKE 'v1.%'),
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT underground_agent_wallets_agent_owner_fkey
    FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE
);
CREATE INDEX underground_agent_wallets_user ON underground_agent_wallets (user_id);
ALTER TABLE underground_agent_wallets ENABLE ROW LEVEL SECURITY;
CREATE POLICY underground_agent_wallets_owner ON underground_agent_wallets
  USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
