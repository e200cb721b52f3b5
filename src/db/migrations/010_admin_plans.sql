-- Admin rights come from proof, not from a claimed email (docs/admin.md):
-- `is_admin` is granted by the one-time setup link of a new instance, by an admin, or by
-- `npm run admin`; ADMIN_EMAILS matches only accounts whose email is verified (an identity
-- provider vouched for it), unless ADMIN_EMAILS_REQUIRE_VERIFIED=false.
ALTER TABLE users
  ADD COLUMN is_admin boolean NOT NULL DEFAULT false,
  ADD COLUMN email_verified boolean NOT NULL DEFAULT false;

-- The setup link's token, stored only as a SHA-256 hash; single use (deleted when spent), and
-- replaced at each start while the instance has no admin.
CREATE TABLE admin_setup_tokens (
  token_hash bytea PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
-- not per-user data: only the owner connection (system work) may read it
ALTER TABLE admin_setup_tokens ENABLE ROW LEVEL SECURITY;
