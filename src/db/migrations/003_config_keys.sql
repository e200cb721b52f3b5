-- Agent configuration with versioned backups (§2 "Agent configuration and backup", §4.2) and
-- user API keys (§2 "API key", §4.3). Both are per-user tables under row-level security.

-- One row per user that has saved a configuration (or restored one). The row is also the
-- per-user lock: every save and restore takes `SELECT … FOR UPDATE` on it first, so concurrent
-- saves of one user are serialised and the backup list never grows past the limit or loses the
-- newest entry.
CREATE TABLE agent_configs (
  user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  -- NULL until the first save: the user still sees the default configuration derived from the plan
  config jsonb CHECK (config IS NULL OR jsonb_typeof(config) = 'object'),
  -- epoch ms of the newest `bkp_<ms>` id handed out; the next id is max(now, this + 1), so ids
  -- stay unique even for two saves within one millisecond or a clock that steps back
  last_backup_ms bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE config_backups (
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  id text NOT NULL CHECK (id ~ '^bkp_(initial|[0-9]{1,16})$'),
  -- insertion order; ties of `created_at` cannot reorder the list
  seq bigint GENERATED ALWAYS AS IDENTITY,
  config jsonb NOT NULL CHECK (jsonb_typeof(config) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, id)
);
CREATE INDEX config_backups_user_seq_idx ON config_backups (user_id, seq DESC);

-- Raw keys are never stored: only the SHA-256 of the whole key and its first 10 characters, the
-- lookup prefix §4.3 describes (also shown to the owner as `keyPreview`).
CREATE TABLE api_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  prefix text NOT NULL CHECK (length(prefix) = 10 AND prefix LIKE 'sk\_%'),
  key_hash bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz
);
CREATE INDEX api_keys_prefix_idx ON api_keys (prefix);
CREATE INDEX api_keys_user_idx ON api_keys (user_id, created_at DESC);

ALTER TABLE agent_configs ENABLE ROW LEVEL SECURITY;
CREATE POLICY agent_configs_owner ON agent_configs USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
ALTER TABLE config_backups ENABLE ROW LEVEL SECURITY;
CREATE POLICY config_backups_owner ON config_backups USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY api_keys_owner ON api_keys USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
