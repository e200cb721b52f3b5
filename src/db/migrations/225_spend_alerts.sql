-- Spend alerts (docs/payments.md "Spend alerts"): a user's threshold on their balance (it fell
-- below) and on each agent's monthly spend (it reached), told once per crossing by email (SMTP)
-- and/or a webhook, and shown on the dashboard.
--
-- `state`: 'armed' (waiting for a crossing), 'sending' (a worker holds it: `holder`, `lease_until`),
-- 'fired' (told; `fired_at`, the value that crossed). A balance alert is armed again once the balance
-- is back at or above its threshold (a credit); a budget alert at the start of the next UTC month
-- (`period`: the month it fired in).
CREATE TABLE spend_alerts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('balance', 'budget')),
  agent_id text,
  threshold_usd numeric(16, 6) NOT NULL CHECK (threshold_usd > 0 AND threshold_usd <= 100000),
  webhook_url text CHECK (length(webhook_url) <= 2048),
  state text NOT NULL DEFAULT 'armed' CHECK (state IN ('armed', 'sending', 'fired')),
  holder text,
  lease_until timestamptz,
  attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  fired_at timestamptz,
  fired_value_usd numeric(24, 10),
  period date,
  last_error text CHECK (length(last_error) <= 500),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'budget') = (agent_id IS NOT NULL)),
  FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE
);
-- one balance alert per user, one budget alert per agent
CREATE UNIQUE INDEX spend_alerts_balance_idx ON spend_alerts (user_id) WHERE kind = 'balance';
CREATE UNIQUE INDEX spend_alerts_budget_idx ON spend_alerts (agent_id) WHERE kind = 'budget';
CREATE INDEX spend_alerts_state_idx ON spend_alerts (state);
ALTER TABLE spend_alerts ENABLE ROW LEVEL SECURITY;
CREATE POLICY spend_alerts_owner ON spend_alerts USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
