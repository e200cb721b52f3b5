-- Conversation sessions owned by the platform (docs/channels.md "Sessions"; §2 session.dmScope
-- per-channel-peer, §8 session tokens). A session is (agent, key): `dashboard` for the owner's chat
-- on the dashboard, `<channel>:<peer id>` for one person on a messaging channel. Its turns are the
-- agent's stored messages that carry its key; calls through the agent's OpenAI-compatible endpoint
-- carry none (the client sends its own history), so they never become another session's history.
-- `source` of a message is the existing `platform` column: dashboard, api, telegram, discord, websocket.
ALTER TABLE agent_messages ADD COLUMN session_key text CHECK (length(session_key) BETWEEN 1 AND 200);
CREATE INDEX agent_messages_session_idx ON agent_messages (agent_id, session_key, seq) WHERE session_key IS NOT NULL;

-- What the model is sent for a session besides its turns: the summary compaction wrote of the turns
-- up to `since_seq` (those, and the turns before a reset, are kept for the owner to read but no
-- longer sent). A reset sets since_seq to the newest message and drops the summary.
CREATE TABLE agent_sessions (
  agent_id text NOT NULL,
  user_id uuid NOT NULL,
  key text NOT NULL CHECK (length(key) BETWEEN 1 AND 200),
  summary text,
  since_seq bigint NOT NULL DEFAULT 0,
  compactions integer NOT NULL DEFAULT 0 CHECK (compactions >= 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, key),
  FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE
);
ALTER TABLE agent_sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY agent_sessions_owner ON agent_sessions USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
