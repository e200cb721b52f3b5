/** SQL of spend holds (migration 205; docs/agents.md "Usage and budgets"). Owner connection only. */
import type { Pool } from 'pg';

/** What hold_spend answered (migration 220); numeric columns as text. */
export type SpendHoldRow = {
  /** 'budget' or 'balance' when a cap refused; null when every cap admitted (and the holds are taken) */
  refused: 'budget' | 'balance' | null;
  /** the agent's budget (null: none), its month's recorded cost and its holds in flight */
  budget: string | null;
  spent: string | null;
  budget_held: string | null;
  /** the wallet's balance (micro-USD) and its holds in flight, when the balance was asked */
  balance_micros: string | null;
  balance_held: string | null;
};

export const spendHoldsRepo = {
  /**
   * Holds `amount` USD (exact decimal text) for this process against the agent's budget (when it
   * has one) and the wallet's balance (when `address` is given), all or nothing, one statement
   * (migration 220). A named prepared statement: it runs before every capped or billed model call.
   */
  async hold(
    pool: Pool,
    o: { agentId: string | null; address: string | null; period: string; holder: string; amount: string; ttlMs: number },
  ): Promise<SpendHoldRow> {
    const r = await pool.query<SpendHoldRow>({
      name: 'ai_hold_spend',
      text: `SELECT refused, budget::text AS budget, spent::text AS spent, budget_held::text AS budget_held,
                    balance_micros::text AS balance_micros, balance_held::text AS balance_held
             FROM hold_spend($1, $2, $3::date, $4::uuid, $5::numeric, make_interval(secs => $6::double precision / 1000))`,
      values: [o.agentId, o.address, o.period, o.holder, o.amount, o.ttlMs],
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
