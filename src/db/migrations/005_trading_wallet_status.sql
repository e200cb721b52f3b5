-- Trading keys (§4.5), session wallets (§2 Wallet, §4.4) and the latest hosting status (§6).

-- One personal trading key per user, AES-256-GCM sealed with SECRETS_ENCRYPTION_KEY. The CHECK
-- rejects anything that is not our sealed format, so a code path that forgot to encrypt fails
-- loudly instead of storing the key in plaintext.
CREATE TABLE trading_keys (
  user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  encrypted_key text NOT NULL CHECK (encrypted_key LIKE 'v1.%'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE trading_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY trading_keys_owner ON trading_keys
  USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- Session wallet: the primary key on user_id makes "one wallet per user" a database invariant,
-- so two parallel `create` calls yield one wallet and one 400. The private key is sealed with
-- WALLET_ENCRYPTION_KEY (same format check as above).
CREATE TABLE session_wallets (
  user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  address text NOT NULL UNIQUE CHECK (address ~ '^0x[0-9a-fA-F]{40}$'),
  encrypted_private_key text NOT NULL CHECK (encrypted_private_key LIKE 'v1.%'),
  network text NOT NULL DEFAULT 'base-sepolia',
  created_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE session_wallets ENABLE ROW LEVEL SECURITY;
CREATE POLICY session_wallets_owner ON session_wallets
  USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- The latest hosting-platform status record, one row (id is always true). Platform-wide, not
-- per-user data: written by the webhook and read by the dashboard, so no row-level security.
CREATE TABLE hosting_status (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  status text NOT NULL,
  name text NOT NULL,
  message text,
  event_type text NOT NULL,
  received_at timestamptz NOT NULL
);
