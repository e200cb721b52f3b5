-- Spend holds: what model calls in flight may still cost (docs/agents.md "Usage and budgets").
--
-- Before a model call starts, the AI layer holds the most the call can cost (the prompt's estimate
-- plus its output limit, at the dearest price among the models it may fall back to) against each
-- cap that applies to it (today an agent's monthly budget, `agent:<id>`). A cap admits a call while
-- what was spent plus what is held is below it, so however many calls run at once the cap is
-- overshot by at most one call's hold. When the call's usage is written (src/domains/ai/usage-store.service.ts),
-- the same statement adds its real cost to the rollup and takes its hold away, so spent + held never
-- drops below the truth for a moment.
--
-- Holds are kept per process (`holder`), not per call: one row per process and cap and period,
-- its `reserved` the sum of that process's calls in flight, so a call costs one upsert and no
-- delete. A process that dies leaves its row behind; the row stops counting once it has not been
-- renewed for the holder TTL (the live process renews its rows while it holds anything), and is
-- deleted later.
--
-- System data like the money tables (migration 070): only the owner connection (the AI gateway's
-- own check, the usage writer) reads or writes it; row-level security without a policy and the
-- owner-only trigger refuse everyone else.
CREATE TABLE spend_holds (
  scope text NOT NULL CHECK (scope ~ '^[a-z]+:[A-Za-z0-9_-]{1,64}$'),
  period date NOT NULL CHECK (extract(day FROM period) = 1),
  holder uuid NOT NULL,
  reserved numeric(24, 10) NOT NULL DEFAULT 0 CHECK (reserved >= 0),
  renewed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, period, holder)
);
ALTER TABLE spend_holds ENABLE ROW LEVEL SECURITY;
CREATE TRIGGER spend_holds_owner_only BEFORE INSERT OR UPDATE OR DELETE ON spend_holds
  FOR EACH STATEMENT EXECUTE FUNCTION owner_connection_only();

-- An agent's budget: hold `amount` for `holder` when the month's cost plus every live hold is below
-- the budget. One call, one round trip. The budget row is locked first, so holds on one agent are
-- taken one at a time; each statement of a PL/pgSQL function reads a fresh snapshot, and holds are
-- read before the cost, so a usage write committing in between is counted twice (its hold and its
-- cost), never not at all. No budget: nothing held, `budget` null.
CREATE FUNCTION hold_agent_budget(p_agent text, p_period date, p_holder uuid, p_amount numeric, p_ttl interval)
RETURNS TABLE (admitted boolean, budget numeric, spent numeric, held numeric)
LANGUAGE plpgsql AS $$
DECLARE
  v_budget numeric;
  v_held numeric;
  v_spent numeric;
BEGIN
  SELECT b.monthly_budget_usd INTO v_budget FROM agent_budgets b WHERE b.agent_id = p_agent FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT true, NULL::numeric, NULL::numeric, NULL::numeric;
    RETURN;
  END IF;
  SELECT coalesce(sum(h.reserved), 0) INTO v_held FROM spend_holds h
    WHERE h.scope = 'agent:' || p_agent AND h.period = p_period AND h.renewed_at > now() - p_ttl;
  SELECT coalesce(sum(m.cost), 0) INTO v_spent FROM ai_usage_agent_monthly m WHERE m.agent_id = p_agent AND m.month = p_period;
  -- compared at the budget's own precision (numeric(16, 6)), as the owner's view rounds month-to-date cost
  IF round(v_spent + v_held, 6) >= v_budget THEN
    RETURN QUERY SELECT false, v_budget, v_spent, v_held;
    RETURN;
  END IF;
  INSERT INTO spend_holds AS h (scope, period, holder, reserved) VALUES ('agent:' || p_agent, p_period, p_holder, p_amount)
    ON CONFLICT (scope, period, holder) DO UPDATE SET reserved = h.reserved + EXCLUDED.reserved, renewed_at = now();
  RETURN QUERY SELECT true, v_budget, v_spent, v_held;
END $$;
