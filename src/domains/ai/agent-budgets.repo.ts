/** SQL of the agents' monthly budgets (docs/agents.md "Usage and budgets"; migration 110). */
import { sql } from 'kysely';
import type { Tx } from '../../db/client.ts';

/** Budget (null: none) and the month's recorded cost of one agent, both as numeric text. */
export type BudgetRow = { budget: string | null; cost: string };

export const agentBudgetsRepo = {
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
