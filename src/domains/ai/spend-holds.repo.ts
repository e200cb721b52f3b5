/** SQL of spend holds (migration 205; docs/agents.md "Usage and budgets"). Owner connection only. */
import type { Pool } from 'pg';

/** What hold_spend answered (migrations 220 and 240); numeric columns as text. */
export type SpendHoldRow = {
  /** 'budget' (the agent's), 'key' (the API key's) or 'balance' when a cap refused; null when every cap admitted (and the holds are taken) */
  refused: 'budget' | 'key' | 'balance' | null;
  /** the agent's budget (null: none), its month's recorded cost and its holds in flight */
  budget: string | null;
  spent: string | null;
  budget_held: string | null;
  /** the wallet's balance (micro-USD) and its holds in flight, when the balance was asked */
  balance_micros: string | null;
  balance_held: string | null;
  /** the API key's budget (null: none, or no key), its month's recorded cost and its holds in flight */
  key_budget: string | null;
  key_spent: string | null;
  key_held: string | null;
};

export const spendHoldsRepo = {
  /**
   * Holds `amount` USD (exact decimal text) for this process against the agent's budget (when it
   * has one), the API key's (when `keyId`, a key of `userId`, has one) and the wallet's balance
   * (when `address` is given), all or nothing, one statement (migrations 220 and 240). A named
   * prepared statement: it runs before every capped or billed model call.
   *
   * Its commit does not wait for the WAL flush (docs/benchmarks.md "Billing"): hold_spend locks the
   * wallet's (and the budgets') rows until commit, so with a synchronous commit every concurrent call
   * of one wallet waited for the flush of each hold before it (a billed call 3x an unbilled one at 16
   * calls at once). A hold needs no durability: it only makes a cap stricter and lapses unless
   * renewed (migration 205); what a call costs is paid by the usage write, which stays synchronous.
   * `set_config(…, true)` lasts to the end of this statement's own transaction (the pool runs it
   * alone, never inside a write of money).
   */
  async hold(
    pool: Pool,
    o: {
      agentId: string | null;
      keyId: string | null;
      /** the key's owner (null: no key) */
      userId: string | null;
      address: string | null;
      period: string;
      holder: string;
      amount: string;
      ttlMs: number;
    },
  ): Promise<SpendHoldRow> {
    const r = await pool.query<SpendHoldRow>({
      name: 'ai_hold_spend_keyed',
      text: `SELECT refused, budget::text AS budget, spent::text AS spent, budget_held::text AS budget_held,
                    balance_micros::text AS balance_micros, balance_held::text AS balance_held,
                    key_budget::text AS key_budget, key_spent::text AS key_spent, key_held::text AS key_held
             FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit,
                  hold_spend($1, $2::uuid, $3::uuid, $4, $5::date, $6::uuid, $7::numeric, make_interval(secs => $8::double precision / 1000))`,
      values: [o.agentId, o.keyId, o.userId, o.address, o.period, o.holder, o.amount, o.ttlMs],
    });
    return r.rows[0]!;
  },

  /** An API key's owner and whether it has a monthly budget (the model gateway's check of a key it is named; owner connection). */
  async keyOwner(pool: Pool, keyId: string): Promise<{ user_id: string; budgeted: boolean } | undefined> {
    const r = await pool.query<{ user_id: string; budgeted: boolean }>({
      name: 'ai_key_owner',
      text: 'SELECT user_id::text AS user_id, monthly_budget_usd IS NOT NULL AS budgeted FROM api_keys WHERE id = $1::uuid',
      values: [keyId],
    });
    return r.rows[0];
  },

  /** An API key's budget (null: none), its month's recorded cost and its live holds (the agent proxy's check before a call). */
  async keyState(
    pool: Pool,
    o: { keyId: string; userId: string; period: string; ttlMs: number },
  ): Promise<{ budget: string | null; spent: string; held: string } | undefined> {
    const r = await pool.query<{ budget: string | null; spent: string; held: string }>({
      name: 'ai_key_state',
      text: `SELECT k.monthly_budget_usd::text AS budget,
                    coalesce((SELECT m.cost FROM ai_usage_key_monthly m WHERE m.key_id = k.id AND m.month = $3::date), 0)::text AS spent,
                    coalesce((SELECT sum(h.reserved) FROM spend_holds h WHERE h.scope = 'key:' || k.id AND h.period = $3::date
                                AND h.renewed_at > now() - make_interval(secs => $4::double precision / 1000)), 0)::text AS held
             FROM api_keys k WHERE k.id = $1::uuid AND k.user_id = $2::uuid`,
      values: [o.keyId, o.userId, o.period, o.ttlMs],
    });
    return r.rows[0];
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
