-- Linked external accounts (§2 "Linked external account", §4.1 identity-provider and code-host
-- sign-in): one row per (provider, subject) the provider vouches for, tied to one user. The
-- subject is the provider's stable id (OIDC `sub`, the code host's numeric user id), never the
-- email: an email can change hands, the subject cannot.
--
-- Sign-in runs before there is a session, so the callback reads and writes these rows on the
-- owner connection; row-level security keeps a signed-in user's own requests (GET
-- /api/auth/linked-accounts under db.withUser) to their own rows.
CREATE TABLE linked_accounts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  provider text NOT NULL CHECK (provider IN ('idp', 'codehost')),
  subject text NOT NULL,
  email text,
  -- the provider's refresh token, encrypted at rest with the secrets key (src/lib/crypto.ts);
  -- never returned by any route
  refresh_token_enc text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (provider, subject)
);
CREATE INDEX linked_accounts_user_idx ON linked_accounts (user_id);
ALTER TABLE linked_accounts ENABLE ROW LEVEL SECURITY;
CREATE POLICY linked_accounts_owner ON linked_accounts USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- Set by a security event from the identity provider (account disabled, credential compromise):
-- identity-provider sign-in is refused while it is set. System data, like the plan and admin
-- right: the request role cannot update it (migrate.ts grants UPDATE on users column by column).
ALTER TABLE users ADD COLUMN idp_signin_disabled_at timestamptz;
