-- §4.4 custodial wallets through the CDP API (docs/payments.md "Custodial wallets"): one row per
-- account the platform created or imported for a user. The provider holds the key; when the
-- platform generated the key itself (POST /api/wallet/cdp without privateKey) it keeps a copy
-- sealed with WALLET_ENCRYPTION_KEY, never in clear.
CREATE TABLE cdp_wallets (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  address text NOT NULL UNIQUE CHECK (address ~ '^0x[0-9a-fA-F]{40}$'),
  provider_name text NOT NULL,
  email text,
  network text NOT NULL DEFAULT 'base-sepolia',
  encrypted_private_key text CHECK (encrypted_private_key IS NULL OR encrypted_private_key LIKE 'v1.%'),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cdp_wallets_user ON cdp_wallets (user_id, created_at);
ALTER TABLE cdp_wallets ENABLE ROW LEVEL SECURITY;
CREATE POLICY cdp_wallets_owner ON cdp_wallets
  USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
