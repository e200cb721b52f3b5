-- AI usage (§4.9 "usage logged per user and model", §4.10 demo usage, §4.9 token quotas).
-- user_id is the header-context id of /api/ai/chat (§5: `x-user-id`, default `anonymous`) or
-- `demo`, so it is text, not a reference to users.
CREATE TABLE ai_usage (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id text NOT NULL CHECK (length(user_id) BETWEEN 1 AND 200),
  agent_id text CHECK (length(agent_id) <= 200),
  model text NOT NULL CHECK (length(model) BETWEEN 1 AND 200),
  provider text NOT NULL,
  prompt_tokens integer NOT NULL CHECK (prompt_tokens >= 0),
  completion_tokens integer NOT NULL CHECK (completion_tokens >= 0),
  total_tokens integer NOT NULL CHECK (total_tokens >= 0),
  -- USD; per-token prices are fractions of a cent
  cost numeric(20, 10) NOT NULL DEFAULT 0 CHECK (cost >= 0),
  created_at timestamptz NOT NULL DEFAULT now()
);
-- per-user history and cost over a time range stay index range scans at millions of rows
CREATE INDEX ai_usage_user_created_idx ON ai_usage (user_id, created_at DESC);
-- whole-platform reports by time: a BRIN index is tiny on an append-only, time-ordered table
CREATE INDEX ai_usage_created_brin ON ai_usage USING brin (created_at);

-- Monthly rollup, updated in the same statement as each insert: quota checks and monthly cost
-- read one row per (user, model) instead of scanning the month's requests.
CREATE TABLE ai_usage_monthly (
  user_id text NOT NULL,
  month date NOT NULL CHECK (extract(day FROM month) = 1),
  model text NOT NULL,
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  prompt_tokens bigint NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
  completion_tokens bigint NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
  total_tokens bigint NOT NULL DEFAULT 0 CHECK (total_tokens >= 0),
  cost numeric(24, 10) NOT NULL DEFAULT 0 CHECK (cost >= 0),
  PRIMARY KEY (user_id, month, model)
);

-- Written by the backend (bearer key, system context) on the owner connection; a signed-in user
-- reading through withUser sees only their own rows.
ALTER TABLE ai_usage ENABLE ROW LEVEL SECURITY;
CREATE POLICY ai_usage_owner ON ai_usage USING (user_id = app_user_id()::text) WITH CHECK (user_id = app_user_id()::text);
ALTER TABLE ai_usage_monthly ENABLE ROW LEVEL SECURITY;
CREATE POLICY ai_usage_monthly_owner ON ai_usage_monthly USING (user_id = app_user_id()::text) WITH CHECK (user_id = app_user_id()::text);
