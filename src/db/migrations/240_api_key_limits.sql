-- API keys people can hand out (docs/payments.md "API keys"; §4.3 API keys, extended): a key may be
-- limited to some of its owner's agents, given a monthly budget (USD), a rate limit and an expiry,
-- and rolled (a new secret, the old one still accepted for a grace period). Model usage made for a
-- key is recorded with it, so usage can be read per key and a key's budget held like an agent's.

-- The limits. `agent_scoped`: the key reaches only the agents listed in api_key_agents (none left,
-- e.g. every one deleted: it reaches none — never "all again"). The previous secret of a roll is
-- kept as the current one is (SHA-256 and lookup prefix), accepted until previous_expires_at.
ALTER TABLE api_keys
  ADD COLUMN agent_scoped boolean NOT NULL DEFAULT false,
  ADD COLUMN monthly_budget_usd numeric(16, 6) CHECK (monthly_budget_usd > 0 AND monthly_budget_usd <= 100000),
  ADD COLUMN rate_limit_per_minute integer CHECK (rate_limit_per_minute BETWEEN 1 AND 100000),
  ADD COLUMN expires_at timestamptz,
  ADD COLUMN rolled_at timestamptz,
  ADD COLUMN previous_prefix text CHECK (length(previous_prefix) = 10 AND previous_prefix LIKE 'sk\_%'),
  ADD COLUMN previous_key_hash bytea UNIQUE CHECK (length(previous_key_hash) = 32),
  ADD COLUMN previous_expires_at timestamptz,
  ADD CONSTRAINT api_keys_previous_whole CHECK (
    (previous_key_hash IS NULL) = (previous_prefix IS NULL) AND (previous_key_hash IS NULL) = (previous_expires_at IS NULL)
  ),
  -- what api_key_agents references, so a key's agents are always its owner's
  ADD CONSTRAINT api_keys_id_user_id_key UNIQUE (id, user_id);
CREATE INDEX api_keys_previous_prefix_idx ON api_keys (previous_prefix) WHERE previous_prefix IS NOT NULL;

-- The agents a scoped key reaches. Both references carry the user (migration 060's rule): a key
-- can only ever name its own owner's agents, and a row goes with its key or its agent.
CREATE TABLE api_key_agents (
  key_id uuid NOT NULL,
  agent_id text NOT NULL,
  user_id uuid NOT NULL,
  PRIMARY KEY (key_id, agent_id),
  FOREIGN KEY (key_id, user_id) REFERENCES api_keys (id, user_id) ON DELETE CASCADE,
  FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE
);
CREATE INDEX api_key_agents_agent_idx ON api_key_agents (agent_id);
ALTER TABLE api_key_agents ENABLE ROW LEVEL SECURITY;
CREATE POLICY api_key_agents_owner ON api_key_agents USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- The key a model call was made for (the agent proxy names it to the agent's runtime, which names
-- it to the model gateway). No reference: usage is history and outlives the key, as it outlives
-- the agent. Part of the usage store's batching key, so a row is one key's calls.
ALTER TABLE ai_usage ADD COLUMN key_id uuid;
CREATE INDEX ai_usage_key_created_idx ON ai_usage (key_id, created_at) WHERE key_id IS NOT NULL;

-- Per-key monthly rollup (UTC calendar month), written in the same statement as the usage rows,
-- like ai_usage_agent_monthly (migration 110): what a key's budget and the Keys page read.
CREATE TABLE ai_usage_key_monthly (
  key_id uuid NOT NULL,
  month date NOT NULL CHECK (extract(day FROM month) = 1),
  user_id text NOT NULL,
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  prompt_tokens bigint NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
  completion_tokens bigint NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
  total_tokens bigint NOT NULL DEFAULT 0 CHECK (total_tokens >= 0),
  cost numeric(24, 10) NOT NULL DEFAULT 0 CHECK (cost >= 0),
  PRIMARY KEY (key_id, month)
);
ALTER TABLE ai_usage_key_monthly ENABLE ROW LEVEL SECURITY;
CREATE POLICY ai_usage_key_monthly_owner ON ai_usage_key_monthly
  USING (user_id = app_user_id()::text) WITH CHECK (user_id = app_user_id()::text);

-- The one hold statement (migration 220) with a third cap: the key's monthly budget (p_key, of the
-- user p_user; a key of anyone else is no cap). Rows are locked in one order — the agent's budget,
-- the key, the wallet — so concurrent holds never deadlock. A key admits like an agent's budget:
-- while its month's cost plus every live hold of `key:<id>` is below it (overshoot: one hold).
-- `refused`: 'budget', 'key' or 'balance'.
DROP FUNCTION hold_spend(text, text, date, uuid, numeric, interval);
CREATE FUNCTION hold_spend(
  p_agent text, p_key uuid, p_user uuid, p_address text, p_period date, p_holder uuid, p_amount numeric, p_ttl interval
)
RETURNS TABLE (
  refused text, budget numeric, spent numeric, budget_held numeric, balance_micros bigint, balance_held numeric,
  key_budget numeric, key_spent numeric, key_held numeric
)
LANGUAGE plpgsql AS $$
DECLARE
  v_budget numeric;
  v_spent numeric;
  v_bheld numeric;
  v_balance bigint;
  v_wheld numeric;
  v_kbudget numeric;
  v_kspent numeric;
  v_kheld numeric;
BEGIN
  IF p_agent IS NOT NULL THEN
    SELECT b.monthly_budget_usd INTO v_budget FROM agent_budgets b WHERE b.agent_id = p_agent FOR UPDATE;
    IF FOUND THEN
      -- holds first, then cost (each statement reads a fresh snapshot): a usage write committing in
      -- between is counted twice, never not at all
      SELECT coalesce(sum(h.reserved), 0) INTO v_bheld FROM spend_holds h
        WHERE h.scope = 'agent:' || p_agent AND h.period = p_period AND h.renewed_at > now() - p_ttl;
      SELECT coalesce(sum(m.cost), 0) INTO v_spent FROM ai_usage_agent_monthly m WHERE m.agent_id = p_agent AND m.month = p_period;
      -- compared at the budget's own precision (numeric(16, 6)), as the owner's view rounds month-to-date cost
      IF round(v_spent + v_bheld, 6) >= v_budget THEN
        RETURN QUERY SELECT 'budget'::text, v_budget, v_spent, v_bheld, NULL::bigint, NULL::numeric, NULL::numeric, NULL::numeric, NULL::numeric;
        RETURN;
      END IF;
    END IF;
  END IF;
  IF p_key IS NOT NULL THEN
    SELECT k.monthly_budget_usd INTO v_kbudget FROM api_keys k
      WHERE k.id = p_key AND k.user_id = p_user AND k.monthly_budget_usd IS NOT NULL FOR UPDATE;
    IF FOUND THEN
      SELECT coalesce(sum(h.reserved), 0) INTO v_kheld FROM spend_holds h
        WHERE h.scope = 'key:' || p_key AND h.period = p_period AND h.renewed_at > now() - p_ttl;
      SELECT coalesce(sum(m.cost), 0) INTO v_kspent FROM ai_usage_key_monthly m WHERE m.key_id = p_key AND m.month = p_period;
      IF round(v_kspent + v_kheld, 6) >= v_kbudget THEN
        RETURN QUERY SELECT 'key'::text, v_budget, v_spent, v_bheld, NULL::bigint, NULL::numeric, v_kbudget, v_kspent, v_kheld;
        RETURN;
      END IF;
    END IF;
  END IF;
  IF p_address IS NOT NULL THEN
    SELECT w.balance_micros INTO v_balance FROM wallet_balances w WHERE w.address = p_address FOR UPDATE;
    v_balance := coalesce(v_balance, 0);
    SELECT coalesce(sum(h.reserved), 0) INTO v_wheld FROM spend_holds h
      WHERE h.scope = 'balance:' || p_address AND h.renewed_at > now() - p_ttl;
    IF v_balance::numeric / 1e6 < v_wheld + p_amount THEN
      RETURN QUERY SELECT 'balance'::text, v_budget, v_spent, v_bheld, v_balance, v_wheld, v_kbudget, v_kspent, v_kheld;
      RETURN;
    END IF;
    INSERT INTO spend_holds AS h (scope, period, holder, reserved) VALUES ('balance:' || p_address, p_period, p_holder, p_amount)
      ON CONFLICT (scope, period, holder) DO UPDATE SET reserved = h.reserved + EXCLUDED.reserved, renewed_at = now();
  END IF;
  IF v_budget IS NOT NULL THEN
    INSERT INTO spend_holds AS h (scope, period, holder, reserved) VALUES ('agent:' || p_agent, p_period, p_holder, p_amount)
      ON CONFLICT (scope, period, holder) DO UPDATE SET reserved = h.reserved + EXCLUDED.reserved, renewed_at = now();
  END IF;
  IF v_kbudget IS NOT NULL THEN
    INSERT INTO spend_holds AS h (scope, period, holder, reserved) VALUES ('key:' || p_key, p_period, p_holder, p_amount)
      ON CONFLICT (scope, period, holder) DO UPDATE SET reserved = h.reserved + EXCLUDED.reserved, renewed_at = now();
  END IF;
  RETURN QUERY SELECT NULL::text, v_budget, v_spent, v_bheld, v_balance, v_wheld, v_kbudget, v_kspent, v_kheld;
END $$;
