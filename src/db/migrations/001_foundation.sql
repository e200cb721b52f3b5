-- Foundation: users, sessions, SIWE nonces, and the row-level security scaffolding every
-- per-user table uses (§2 User and Session, §4.1, §5 "database user context").

-- The role request queries run as (SET LOCAL ROLE inside withUser). It neither owns the tables
-- nor has BYPASSRLS, so policies apply to it. Roles are cluster-wide: tolerate a concurrent
-- creator (two replicas, or parallel test databases in one cluster).
-- An administrator may have created it already (README "Use an existing PostgreSQL"): then the
-- owner role needs no CREATEROLE, so look before creating (CREATE ROLE checks the privilege first).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'platform_app') THEN
    CREATE ROLE platform_app NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
DO $$
BEGIN
  EXECUTE format('GRANT platform_app TO %I', current_user);
EXCEPTION WHEN OTHERS THEN NULL; -- superusers need no membership; others have ADMIN on roles they created
END $$;

-- The current request's user, or NULL when none is set. An unset custom setting reads as ''
-- once a transaction-local value has been set and ended on the connection: hence nullif.
CREATE FUNCTION app_user_id() RETURNS uuid
  LANGUAGE sql STABLE
  AS $$ SELECT nullif(current_setting('app.user_id', true), '')::uuid $$;

CREATE TABLE users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- stored trimmed and lower-cased; the unique index below makes case-insensitive uniqueness a
  -- database invariant, not only a code convention
  email text NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 320),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 320),
  password_hash text,
  plan text NOT NULL DEFAULT 'solo' CHECK (plan IN ('solo', 'collective', 'label', 'network')),
  subscription_status text NOT NULL DEFAULT 'none',
  subscription_id text,
  credits integer NOT NULL DEFAULT 0 CHECK (credits >= 0),
  two_factor_enabled boolean NOT NULL DEFAULT false,
  referral_code text NOT NULL UNIQUE CHECK (referral_code = upper(referral_code) AND referral_code ~ '^[A-Z0-9-]{1,20}$'),
  referred_by uuid REFERENCES users (id) ON DELETE SET NULL,
  wallet_address text UNIQUE CHECK (wallet_address = lower(wallet_address)),
  runtime_instance_id text,
  idp_sign_in_disabled boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_lower_key ON users (lower(email));

CREATE TABLE sessions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- SHA-256 of the cookie token: a database leak yields no usable cookie
  token_hash bytea NOT NULL UNIQUE,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  user_agent text,
  ip text
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);
CREATE INDEX sessions_expires_at_idx ON sessions (expires_at);

-- Server nonces for SIWE: single use (deleted when consumed) and expiring.
CREATE TABLE siwe_nonces (
  nonce text PRIMARY KEY,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX siwe_nonces_expires_at_idx ON siwe_nonces (expires_at);

ALTER TABLE users ENABLE ROW LEVEL SECURITY;
CREATE POLICY users_self ON users USING (id = app_user_id()) WITH CHECK (id = app_user_id());
ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY sessions_owner ON sessions USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
