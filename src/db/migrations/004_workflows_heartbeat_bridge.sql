-- Workflows and nodes (§2, §4.14), heartbeat settings (§2, §4.12) and the bridge message bus
-- (§2, §4.13). Length bounds mirror LIMITS in src/config/limits.ts so the database refuses what
-- the API refuses, even for a caller that skips the service.

-- §4.14 workflows are owner-scoped: row-level security on user_id.
CREATE TABLE workflows (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  description text CHECK (length(description) <= 2000),
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- target of the nodes' composite foreign key below
  UNIQUE (id, user_id)
);
-- the list is "newest update first" per user
CREATE INDEX workflows_user_updated_idx ON workflows (user_id, updated_at DESC);

CREATE TABLE workflow_nodes (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workflow_id uuid NOT NULL,
  -- denormalised owner so the policy needs no join; the composite foreign key keeps it equal to
  -- the workflow's owner, so a node can never sit in another user's workflow
  user_id uuid NOT NULL,
  type text NOT NULL CHECK (type IN ('trigger', 'action', 'condition', 'output')),
  -- §2: config and position are JSON-encoded strings (kept as text so they round-trip byte for byte)
  config text NOT NULL DEFAULT '{}' CHECK (length(config) <= 16384),
  position text NOT NULL DEFAULT '{"x":0,"y":0}' CHECK (length(position) <= 256),
  -- clock_timestamp, not now(): nodes inserted by one statement still get increasing times;
  -- seq breaks the remaining ties in insertion order ("nodes by creation time", §4.14)
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  seq bigint GENERATED ALWAYS AS IDENTITY,
  FOREIGN KEY (workflow_id, user_id) REFERENCES workflows (id, user_id) ON DELETE CASCADE
);
CREATE INDEX workflow_nodes_workflow_idx ON workflow_nodes (workflow_id, created_at, seq);

ALTER TABLE workflows ENABLE ROW LEVEL SECURITY;
CREATE POLICY workflows_owner ON workflows USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
ALTER TABLE workflow_nodes ENABLE ROW LEVEL SECURITY;
CREATE POLICY workflow_nodes_owner ON workflow_nodes USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- §4.12 heartbeat settings, one row per (user, agent). Keyed by user as well as agent because an
-- agent id may be the user's runtime instance id, which is not a row of `agents`; the row is the
-- user's own setting for that agent, so row-level security applies.
CREATE TABLE heartbeat_settings (
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  agent_id text NOT NULL CHECK (length(agent_id) BETWEEN 1 AND 200),
  frequency text NOT NULL DEFAULT '3h' CHECK (frequency ~ '^[1-9][0-9]{0,5}[mhd]$'),
  enabled boolean NOT NULL DEFAULT true,
  last_heartbeat timestamptz,
  next_heartbeat timestamptz,
  last_updated timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, agent_id)
);

ALTER TABLE heartbeat_settings ENABLE ROW LEVEL SECURITY;
CREATE POLICY heartbeat_settings_owner ON heartbeat_settings USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- §4.13 bridge: an internal bus between the platform's own agents and its operator, guarded by
-- one shared secret (x-bridge-secret). It belongs to no user: no user_id and no row-level
-- security; the service reaches it on the owner connection.
CREATE TABLE bridge_messages (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- insertion order, breaking ties between equal timestamps
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  sender text NOT NULL CHECK (length(sender) BETWEEN 1 AND 64),
  channel text NOT NULL DEFAULT 'general' CHECK (channel IN ('general', 'tasks', 'alerts')),
  content text NOT NULL CHECK (length(content) BETWEEN 1 AND 16000),
  priority text NOT NULL DEFAULT 'normal' CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX bridge_messages_channel_created_idx ON bridge_messages (channel, created_at, seq);
CREATE INDEX bridge_messages_created_idx ON bridge_messages (created_at DESC, seq DESC);

-- Per-reader read tracking: the primary key is the claim. An inbox read inserts its messages
-- here with ON CONFLICT DO NOTHING RETURNING, so of two racing reads by one reader exactly one
-- gets each message (the other waits on the uncommitted row, then sees the conflict).
CREATE TABLE bridge_reads (
  message_id uuid NOT NULL REFERENCES bridge_messages (id) ON DELETE CASCADE,
  reader text NOT NULL CHECK (length(reader) BETWEEN 1 AND 100),
  read_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (message_id, reader)
);
