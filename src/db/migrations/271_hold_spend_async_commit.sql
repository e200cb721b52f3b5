-- Spend holds commit without waiting for the WAL flush (docs/benchmarks.md "Billing"; docs/payments.md
-- "Model calls from the balance"). hold_spend locks the wallet's (and the budgets') row, and a row lock
-- is let go only when the transaction has committed: with synchronous commit every concurrent call of
-- one wallet waited for the flush of each hold before it, which made a billed call 3x slower than an
-- unbilled one at 16 calls at once. A hold needs no durability: it only ever makes a cap stricter,
-- lapses when its process stops renewing it (migration 205), and what a call costs is paid by the usage
-- write, which stays synchronous (it is money: the journal and the balance). A hold lost to a
-- PostgreSQL crash lets the calls in flight then be admitted against a balance without it, and their
-- usage write debits at most what the balance holds (migration 220): never below zero.
-- set_config(…, true) lasts to the end of the calling transaction: hold_spend is only ever called as a
-- statement of its own (src/domains/ai/spend-holds.repo.ts), never inside a write of money.
-- The function as migration 240 wrote it, with that one line first.
CREATE OR REPLACE FUNCTION hold_spend(
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
  -- a hold is ephemeral (it lapses when not renewed): its commit need not wait for the WAL flush, which
  -- the next call of the same wallet (or budget) would otherwise wait for behind the row lock
  PERFORM set_config('synchronous_commit', 'off', true);
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
