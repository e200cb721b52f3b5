-- Calendar connections (§2 "Calendar connection", §4.6): per user, the provider's tokens, the
-- primary calendar id and its timezone. The primary key on user_id makes "one connection per
-- user" a database invariant: connecting again replaces the row.
--
-- Both tokens are AES-256-GCM sealed with the secrets key (src/lib/crypto.ts); the CHECKs reject
-- anything that is not our sealed format, so a code path that forgot to encrypt fails loudly
-- instead of storing a token in plaintext. Every read and write runs under db.withUser, so
-- row-level security keeps a user to their own row (the OAuth callback too: its user comes from
-- the signed state).
CREATE TABLE calendar_connections (
  user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  calendar_id text NOT NULL CHECK (length(calendar_id) BETWEEN 1 AND 1024),
  timezone text NOT NULL CHECK (length(timezone) BETWEEN 1 AND 64),
  access_token_enc text NOT NULL CHECK (access_token_enc LIKE 'v1.%'),
  refresh_token_enc text CHECK (refresh_token_enc LIKE 'v1.%'),
  -- when the access token stops working (now + expires_in at issue); refreshed a little before
  access_expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE calendar_connections ENABLE ROW LEVEL SECURITY;
CREATE POLICY calendar_connections_owner ON calendar_connections
  USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
