-- Password reset by email (§4.18 "Password reset endpoints: not shown", designed in
-- docs/security.md "Password reset"). One row per reset link mailed: the token itself is never
-- stored, only its SHA-256, so a database leak yields no usable link. A row is spent by setting
-- `used_at` (an UPDATE ... WHERE used_at IS NULL decides concurrent confirms: one wins), and a
-- successful reset spends every other outstanding link of the user.
--
-- System data: the request and the confirm run before anyone is signed in, on the owner
-- connection. Row-level security with no policy keeps the request role (platform_app) from
-- reading or writing any row whatever migrate.ts grants: no user has business with these rows.
CREATE TABLE password_reset_tokens (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  token_hash bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX password_reset_tokens_user_idx ON password_reset_tokens (user_id) WHERE used_at IS NULL;
CREATE INDEX password_reset_tokens_expires_idx ON password_reset_tokens (expires_at);
ALTER TABLE password_reset_tokens ENABLE ROW LEVEL SECURITY;
