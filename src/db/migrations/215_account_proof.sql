-- Who proved an address, and which password is older than that proof (docs/identity.md "What a
-- sign-in does", docs/admin.md). Registering an address with a password proves nothing about it;
-- an identity provider or code host vouching for it does. A password set before the proof may be
-- a stranger's who registered the address first, so:
-- - the first proof clears that password (src/domains/accounts/external-signin.service.ts);
-- - ADMIN_EMAILS never counts for an account whose password predates its verification
--   (src/domains/accounts/admin.rules.ts), whichever way the address came to be verified.
--
-- The two times are kept by a trigger, not by the code paths that set a password or verify an
-- address (sign-up, reset, sign-in, `npm run admin`, whatever comes later): none can forget them.
ALTER TABLE users
  ADD COLUMN email_verified_at timestamptz,
  ADD COLUMN password_set_at timestamptz;

-- Existing rows: a password was set at sign-up or at the last reset spent; an address was
-- verified when its first provider link was made (the only way it could be verified so far).
UPDATE users u SET
  password_set_at = CASE WHEN u.password_hash IS NULL THEN NULL ELSE coalesce(
    (SELECT max(t.used_at) FROM password_reset_tokens t WHERE t.user_id = u.id), u.created_at) END,
  email_verified_at = CASE WHEN NOT u.email_verified THEN NULL ELSE coalesce(
    (SELECT min(l.created_at) FROM linked_accounts l WHERE l.user_id = u.id), u.created_at) END;

-- Strictly earlier: a password and a proof in one transaction (equal now()) do not predate.
ALTER TABLE users ADD COLUMN password_predates_verification boolean NOT NULL
  GENERATED ALWAYS AS (password_set_at IS NOT NULL AND (email_verified_at IS NULL OR password_set_at < email_verified_at)) STORED;

CREATE FUNCTION users_proof_times() RETURNS trigger
  LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    NEW.password_set_at := CASE WHEN NEW.password_hash IS NULL THEN NULL ELSE now() END;
    NEW.email_verified_at := CASE WHEN NEW.email_verified THEN now() END;
    RETURN NEW;
  END IF;
  IF NEW.password_hash IS DISTINCT FROM OLD.password_hash THEN
    NEW.password_set_at := CASE WHEN NEW.password_hash IS NULL THEN NULL ELSE now() END;
  ELSE
    NEW.password_set_at := OLD.password_set_at;
  END IF;
  IF NEW.email_verified IS DISTINCT FROM OLD.email_verified THEN
    NEW.email_verified_at := CASE WHEN NEW.email_verified THEN now() END;
  ELSE
    NEW.email_verified_at := OLD.email_verified_at;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER users_proof_times BEFORE INSERT OR UPDATE ON users FOR EACH ROW EXECUTE FUNCTION users_proof_times();

-- One-time notices the dashboard shows after sign-in until the user dismisses them (GET
-- /api/auth/session `user.notice`, DELETE /api/auth/notice). `password-cleared`: the first proof
-- of the address by `provider` cleared a password set before it. A user's own rows, under
-- row-level security (the dismissal runs as the request role).
CREATE TABLE account_notices (
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('password-cleared')),
  provider text NOT NULL CHECK (provider IN ('idp', 'codehost')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, kind)
);
ALTER TABLE account_notices ENABLE ROW LEVEL SECURITY;
CREATE POLICY account_notices_owner ON account_notices USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
