-- Messaging channels the platform runs for an agent (docs/channels.md): one row per agent and
-- provider, the bot token sealed at rest (AES-256-GCM with SECRETS_ENCRYPTION_KEY, like the other
-- channel secrets) and never answered. The connection itself is held by one backend process at a
-- time: `holder` and `lease_until` are its lease (renewed while it runs, taken over by another
-- process when it lapses), so replicas never poll one bot twice (Telegram refuses a second poller).
CREATE TABLE agent_channels (
  agent_id text NOT NULL,
  user_id uuid NOT NULL,
  kind text NOT NULL CHECK (kind IN ('telegram', 'discord')),
  token_enc text NOT NULL,
  -- the last 4 characters of the token, so the owner can tell which bot it is
  token_hint text NOT NULL,
  bot_id text,
  bot_username text,
  -- §2 channels.<name>.allowFrom: provider user ids or @names; empty allows every sender
  allow_from text[] NOT NULL DEFAULT '{}',
  enabled boolean NOT NULL DEFAULT true,
  status text NOT NULL DEFAULT 'connecting' CHECK (status IN ('connecting', 'connected', 'error', 'disabled')),
  last_error text,
  holder text,
  lease_until timestamptz,
  -- bumped on every change of token or settings: a holder restarts its connection when it differs
  revision integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, kind),
  FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE
);
ALTER TABLE agent_channels ENABLE ROW LEVEL SECURITY;
CREATE POLICY agent_channels_owner ON agent_channels USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- People who wrote to a channel (the Channels tab's recent senders), allowed or not.
CREATE TABLE channel_senders (
  agent_id text NOT NULL,
  user_id uuid NOT NULL,
  kind text NOT NULL,
  sender_id text NOT NULL,
  username text,
  display_name text,
  messages integer NOT NULL DEFAULT 1 CHECK (messages >= 0),
  allowed boolean NOT NULL,
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, kind, sender_id),
  FOREIGN KEY (agent_id, kind) REFERENCES agent_channels (agent_id, kind) ON DELETE CASCADE
);
CREATE INDEX channel_senders_recent_idx ON channel_senders (agent_id, kind, last_seen_at DESC);
ALTER TABLE channel_senders ENABLE ROW LEVEL SECURITY;
CREATE POLICY channel_senders_owner ON channel_senders USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- Pairing (OpenClaw's dmPolicy `pairing`): a sender not on the allow list is given a code; the
-- owner approves it on the Channels tab, which adds the sender to allow_from. One live code per
-- sender; a code expires after an hour, as OpenClaw's do.
CREATE TABLE channel_pairings (
  agent_id text NOT NULL,
  user_id uuid NOT NULL,
  kind text NOT NULL,
  code text NOT NULL CHECK (code ~ '^[A-Z0-9]{8}$'),
  sender_id text NOT NULL,
  username text,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (agent_id, kind, code),
  UNIQUE (agent_id, kind, sender_id),
  FOREIGN KEY (agent_id, kind) REFERENCES agent_channels (agent_id, kind) ON DELETE CASCADE
);
ALTER TABLE channel_pairings ENABLE ROW LEVEL SECURITY;
CREATE POLICY channel_pairings_owner ON channel_pairings USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
