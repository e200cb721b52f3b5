/** SQL of the agents' monthly budgets (docs/agents.md "Usage and budgets"; migration 110). */
import { sql } from 'kysely';
import type { Pool } from 'pg';
import type { Tx } from '../../db/client.ts';

/** Budget (null: none) and the month's recorded cost of one agent, both as numeric text. */
export type BudgetRow = { budget: string | null; cost: string };

export const agentBudgetsRepo = {
  /**
   * The gateway's check, on the owner connection (the agent's own key already named the agent):
   * the budget and the month's cost from the per-agent rollup, one statement by primary keys. A
   * named prepared statement, as insertUsage: it runs before every model call of an agent with a
   * budget. No row: the agent has no budget.
   */
  async budgetAndCost(pool: Pool, agentId: string, month: string): Promise<BudgetRow | null> {
    const r = await pool.query<BudgetRow>({
      name: 'ai_agent_budget_check',
      text: `SELECT b.monthly_budget_usd::text AS budget, coalesce(m.cost, 0)::text AS cost
             FROM agent_budgets b LEFT JOIN ai_usage_agent_monthly m ON m.agent_id = b.agent_id AND m.month = $2::date
             WHERE b.agent_id = $1`,
      values: [agentId, month],
    });
    return r.rows[0] ?? null;
  },

  /** The caller's agent (row-level security: another user's agent is not found). */
  async ownedAgent(trx: Tx, agentId: string): Promise<{ id: string; name: string } | undefined> {
    return trx.selectFrom('agents').select(['id', 'name']).where('id', '=', agentId).executeTakeFirst();
  },

  /** The owner's view: budget (null: none) and the month's recorded cost, under row-level security. */
  async ownerView(trx: Tx, agentId: string, month: string): Promise<BudgetRow> {
    const budget = await trx
      .selectFrom('agent_budgets')
      .select(sql<string>`monthly_budget_usd::text`.as('budget'))
      .where('agent_id', '=', agentId)
      .executeTakeFirst();
    const cost = await trx
      .selectFrom('ai_usage_agent_monthly')
      .select(sql<string>`cost::text`.as('cost'))
      .where('agent_id', '=', agentId)
      .where('month', '=', sql<Date>`${month}::date`)
      .executeTakeFirst();
    return { budget: budget?.budget ?? null, cost: cost?.cost ?? '0' };
  },

  async upsert(trx: Tx, userId: string, agentId: string, usd: number): Promise<void> {
    await trx
      .insertInto('agent_budgets')
      .values({ agent_id: agentId, user_id: userId, monthly_budget_usd: usd.toFixed(6) })
      .onConflict((oc) => oc.column('agent_id').doUpdateSet({ monthly_budget_usd: usd.toFixed(6), updated_at: sql`now()` }))
      .execute();
  },

  async remove(trx: Tx, agentId: string): Promise<void> {
    await trx.deleteFrom('agent_budgets').where('agent_id', '=', agentId).execute();
  },
};
