-- Usage and budgets per agent (docs/agents.md "Usage and budgets"; §4.9 usage log, §4.7 agents).
--
-- agent_budgets: an owner's monthly spending limit (USD) for one agent; no row means no budget.
-- Keyed by the agent and referencing it by (id, user_id) like the other per-agent tables
-- (migration 060), so a budget can only belong to the agent's owner and goes with the agent.
CREATE TABLE agent_budgets (
  agent_id text PRIMARY KEY,
  user_id uuid NOT NULL,
  monthly_budget_usd numeric(16, 6) NOT NULL CHECK (monthly_budget_usd > 0 AND monthly_budget_usd <= 100000),
  updated_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE
);
ALTER TABLE agent_budgets ENABLE ROW LEVEL SECURITY;
CREATE POLICY agent_budgets_owner ON agent_budgets USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- Per-agent monthly rollup (UTC calendar month), written in the same statement as the usage rows
-- (ai.repo.ts insertUsage), so the gateway's budget check reads one row by primary key instead of
-- summing the month's requests. No reference to agents: usage is history and outlives the agent,
-- as ai_usage rows do.
CREATE TABLE ai_usage_agent_monthly (
  agent_id text NOT NULL,
  month date NOT NULL CHECK (extract(day FROM month) = 1),
  user_id text NOT NULL,
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  prompt_tokens bigint NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
  completion_tokens bigint NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
  total_tokens bigint NOT NULL DEFAULT 0 CHECK (total_tokens >= 0),
  cost numeric(24, 10) NOT NULL DEFAULT 0 CHECK (cost >= 0),
  PRIMARY KEY (agent_id, month)
);
ALTER TABLE ai_usage_agent_monthly ENABLE ROW LEVEL SECURITY;
CREATE POLICY ai_usage_agent_monthly_owner ON ai_usage_agent_monthly
  USING (user_id = app_user_id()::text) WITH CHECK (user_id = app_user_id()::text);

-- usage recorded before this migration counts toward this month's budgets too
INSERT INTO ai_usage_agent_monthly (agent_id, month, user_id, requests, prompt_tokens, completion_tokens, total_tokens, cost)
SELECT agent_id, date_trunc('month', created_at AT TIME ZONE 'UTC')::date, min(user_id),
       count(*), sum(prompt_tokens), sum(completion_tokens), sum(total_tokens), sum(cost)
FROM ai_usage WHERE agent_id IS NOT NULL GROUP BY 1, 2;

-- one agent's usage over a time range (GET /api/agents/:id/usage) stays an index range scan
CREATE INDEX ai_usage_agent_created_idx ON ai_usage (agent_id, created_at) WHERE agent_id IS NOT NULL;
