/** SQL of spend holds (migration 205; docs/agents.md "Usage and budgets"). Owner connection only. */
import type { Pool } from 'pg';

/** What hold_agent_budget answered; numeric columns as text. */
export type AgentBudgetHoldRow = { admitted: boolean; budget: string | null; spent: string | null; held: string | null };

export const spendHoldsRepo = {
  /**
   * Holds `amount` USD (exact decimal text) of an agent's monthly budget for this process, if the
   * month's cost plus every live hold is below the budget (migration 205). A named prepared
   * statement: it runs before every model call of an agent with a budget.
   */
  async holdAgentBudget(pool: Pool, agentId: string, period: string, holder: string, amount: string, ttlMs: number) {
    const r = await pool.query<AgentBudgetHoldRow>({
      name: 'ai_hold_agent_budget',
      text: `SELECT admitted, budget::text AS budget, spent::text AS spent, held::text AS held
             FROM hold_agent_budget($1, $2::date, $3::uuid, $4::numeric, make_interval(secs => $5::double precision / 1000))`,
      values: [agentId, period, holder, amount, ttlMs],
    });
    return r.rows[0]!;
  },

  /** Keeps this process's holds counting (they stop counting TTL after their last renewal). */
  async renew(pool: Pool, holder: string): Promise<void> {
    await pool.query({
      name: 'ai_renew_spend_holds',
      text: 'UPDATE spend_holds SET renewed_at = now() WHERE holder = $1::uuid AND reserved > 0',
      values: [holder],
    });
  },

  /**
   * Rows nobody counts any more: a dead process's (not renewed for twice the TTL) and this process's
   * own empty ones. Keeps the table at about one row per agent with a budget and live process.
   */
  async purge(pool: Pool, holder: string, ttlMs: number): Promise<void> {
    await pool.query(
      `DELETE FROM spend_holds WHERE renewed_at < now() - make_interval(secs => $2::double precision / 500)
          OR (holder = $1::uuid AND reserved = 0)`,
      [holder, ttlMs],
    );
  },
};
