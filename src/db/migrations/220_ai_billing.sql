-- Model calls paid from the balance (AI_BILLING=balance; docs/payments.md "Model calls from the
-- balance"), operator prices for models the catalogue does not price, and one hold statement for
-- every cap a call is under.

-- Operator prices (USD per million tokens), set on the admin page; they win over MODEL_PRICES and
-- the catalogue's own prices. Platform data, not a tenant's: the owner connection only (the admin
-- service and the AI layer's catalogue read it), like the money tables.
CREATE TABLE model_prices (
  model_id text PRIMARY KEY CHECK (length(model_id) BETWEEN 1 AND 200),
  input_per_m numeric(20, 10) NOT NULL CHECK (input_per_m >= 0 AND input_per_m <= 100000),
  output_per_m numeric(20, 10) NOT NULL CHECK (output_per_m >= 0 AND output_per_m <= 100000),
  updated_by uuid REFERENCES users (id) ON DELETE SET NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE model_prices ENABLE ROW LEVEL SECURITY;
CREATE TRIGGER model_prices_owner_only BEFORE INSERT OR UPDATE OR DELETE ON model_prices
  FOR EACH STATEMENT EXECUTE FUNCTION owner_connection_only();

-- Usage rows say whether their model had a price (the Usage page shows "unpriced", never $0.00
-- for a model nobody priced) and which journal row paid them (billing on).
ALTER TABLE ai_usage ADD COLUMN priced boolean NOT NULL DEFAULT true;
ALTER TABLE ai_usage ADD COLUMN billing_event text CHECK (length(billing_event) BETWEEN 1 AND 255);
CREATE INDEX ai_usage_billing_event_idx ON ai_usage (billing_event) WHERE billing_event IS NOT NULL;

-- What model calls have cost each wallet so far, in 1e-10 USD (the usage rows' unit). A batch of
-- usage debits the wallet the micro-dollars this total crossed, so the journal's debits over any
-- stretch equal the usage cost over it to within one micro-dollar (no per-call rounding adds up).
CREATE TABLE ai_billing_totals (
  address text PRIMARY KEY CHECK (address ~ '^0x[0-9a-f]{40}$'),
  cost_units numeric(30, 0) NOT NULL DEFAULT 0 CHECK (cost_units >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE ai_billing_totals ENABLE ROW LEVEL SECURITY;
CREATE TRIGGER ai_billing_totals_owner_only BEFORE INSERT OR UPDATE OR DELETE ON ai_billing_totals
  FOR EACH STATEMENT EXECUTE FUNCTION owner_connection_only();

-- One hold for every cap a call is under, in one statement (migration 205 explains holds): the
-- agent's monthly budget (p_agent, when it has one) and the wallet balance (p_address, billing
-- on). Rows are locked in one order (the budget, then the wallet), so concurrent holds never
-- deadlock. A budget admits while spent + held is below it (overshoot: one hold); a balance only
-- when it covers every hold on it and this one (never below zero). Nothing is held unless every
-- cap admits. `refused`: 'budget' or 'balance'; the numbers say why.
CREATE FUNCTION hold_spend(p_agent text, p_address text, p_period date, p_holder uuid, p_amount numeric, p_ttl interval)
RETURNS TABLE (refused text, budget numeric, spent numeric, budget_held numeric, balance_micros bigint, balance_held numeric)
LANGUAGE plpgsql AS $$
DECLARE
  v_budget numeric;
  v_spent numeric;
  v_bheld numeric;
  v_balance bigint;
  v_wheld numeric;
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
        RETURN QUERY SELECT 'budget'::text, v_budget, v_spent, v_bheld, NULL::bigint, NULL::numeric;
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
      RETURN QUERY SELECT 'balance'::text, v_budget, v_spent, v_bheld, v_balance, v_wheld;
      RETURN;
    END IF;
    INSERT INTO spend_holds AS h (scope, period, holder, reserved) VALUES ('balance:' || p_address, p_period, p_holder, p_amount)
      ON CONFLICT (scope, period, holder) DO UPDATE SET reserved = h.reserved + EXCLUDED.reserved, renewed_at = now();
  END IF;
  IF v_budget IS NOT NULL THEN
    INSERT INTO spend_holds AS h (scope, period, holder, reserved) VALUES ('agent:' || p_agent, p_period, p_holder, p_amount)
      ON CONFLICT (scope, period, holder) DO UPDATE SET reserved = h.reserved + EXCLUDED.reserved, renewed_at = now();
  END IF;
  RETURN QUERY SELECT NULL::text, v_budget, v_spent, v_bheld, v_balance, v_wheld;
END $$;

DROP FUNCTION hold_agent_budget(text, date, uuid, numeric, interval);
