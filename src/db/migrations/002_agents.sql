-- Agents (§2 Agent, §3): the base table other domains reference (heartbeat ownership, logs,
-- messages, deployments). Later migrations of the agents domain extend it.
CREATE TABLE agents (
  -- DNS-safe: the id is the first label of `<id>.<AGENTS_DOMAIN>`
  id text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9-]{2,62}$'),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  model text NOT NULL DEFAULT 'claude-opus-4-6',
  ai_provider text NOT NULL DEFAULT 'router',
  plan text NOT NULL DEFAULT 'label',
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'provisioning', 'running', 'active', 'stopped', 'suspended', 'error')),
  subdomain text NOT NULL,
  url text NOT NULL,
  runtime_version text,
  verified boolean NOT NULL DEFAULT false,
  verification_type text,
  attestation_uid text,
  verified_at timestamptz,
  started_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agents_user_id_idx ON agents (user_id, created_at DESC);

ALTER TABLE agents ENABLE ROW LEVEL SECURITY;
CREATE POLICY agents_owner ON agents USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
