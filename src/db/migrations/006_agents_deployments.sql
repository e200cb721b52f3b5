-- Agents domain, part 2: where an agent runs, its own credentials, deployment jobs and stored
-- chat messages (§2 Agent, §3 Agent states, §4.7, §8 gateway token size).

-- Where the driver says the gateway answers (http://127.0.0.1:<port> locally, https://<subdomain>
-- remotely), the driver's id of the unit, and the agent's own configuration (§4.7 /config).
ALTER TABLE agents
  ADD COLUMN gateway_url text,
  ADD COLUMN external_id text,
  ADD COLUMN config jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(config) = 'object');

-- Per-agent credentials (docs/architecture.md rule 6): the gateway token is encrypted (AES-256-GCM, it must be
-- read back to redeploy), the platform key is stored only as a SHA-256 hash and rotated on every
-- deploy, so a container never holds a platform-wide secret and a leaked key dies with its deploy.
CREATE TABLE agent_credentials (
  agent_id text PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  gateway_token_enc text NOT NULL,
  platform_key_hash bytea UNIQUE,
  platform_key_prefix text,
  created_at timestamptz NOT NULL DEFAULT now(),
  rotated_at timestamptz
);
ALTER TABLE agent_credentials ENABLE ROW LEVEL SECURITY;
CREATE POLICY agent_credentials_owner ON agent_credentials USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- Deployment jobs. Workers take them with FOR UPDATE SKIP LOCKED and hold a lease they renew
-- while working; a job whose lease expired (the worker crashed) is taken again. The partial
-- unique index makes "one active job per agent" a database invariant, so two backends asked to
-- deploy the same agent at once enqueue (and so run) it once.
CREATE TABLE deployments (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  action text NOT NULL DEFAULT 'deploy' CHECK (action IN ('deploy')),
  status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  max_attempts integer NOT NULL DEFAULT 3 CHECK (max_attempts > 0),
  run_after timestamptz NOT NULL DEFAULT now(),
  locked_by text,
  lease_until timestamptz,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE UNIQUE INDEX deployments_one_active_per_agent ON deployments (agent_id) WHERE status IN ('queued', 'running');
CREATE INDEX deployments_takeable_idx ON deployments (run_after) WHERE status = 'queued';
CREATE INDEX deployments_leased_idx ON deployments (lease_until) WHERE status = 'running';
CREATE INDEX deployments_agent_idx ON deployments (agent_id, created_at DESC);
ALTER TABLE deployments ENABLE ROW LEVEL SECURITY;
CREATE POLICY deployments_owner ON deployments USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- Chat messages exchanged with an agent (§4.7 /messages), written by the chat paths.
CREATE TABLE agent_messages (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  sender text NOT NULL CHECK (sender IN ('user', 'agent', 'system')),
  content text NOT NULL,
  platform text NOT NULL DEFAULT 'web',
  -- for agent replies: time to answer and whether it failed (stats: averageResponseTime, rates)
  response_ms integer CHECK (response_ms >= 0),
  failed boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_messages_agent_idx ON agent_messages (agent_id, created_at DESC);
ALTER TABLE agent_messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY agent_messages_owner ON agent_messages USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
