/**
 * Monthly budgets per agent (docs/agents.md "Usage and budgets"): an owner caps what one agent may
 * spend on models through the AI gateway in a UTC calendar month; the gateway refuses the agent's
 * calls before any provider is contacted once the month's cost and the calls in flight reach it.
 *
 * Each call holds the most it can cost before it starts (the spend guard, spend-holds.service.ts,
 * migrations 205 and 220): the budget admits a call while the month's cost plus every call in flight
 * is below it, so however many calls run at once the budget is overshot by at most one call's hold,
 * across replicas too. This file is the owner's side: setting, clearing and reading a budget.
 */
import type { Db } from '../../db/client.ts';
import { isCheckViolation } from '../../db/errors.ts';
import { AppError, badRequest, notFound } from '../../lib/errors.ts';
import { agentBudgetsRepo, type BudgetRow } from './agent-budgets.repo.ts';
import { monthOf } from './ai.repo.ts';
import type { UsageStore } from './usage-store.service.ts';

/** The highest budget an owner may set (USD per month); the database checks it too (migration 110). */
export const AGENT_BUDGET_MAX_USD = 100_000;
/**
 * The lowest: the column keeps 6 decimal places (`numeric(16, 6)`, migration 110), so a smaller
 * amount would be stored as 0, which its CHECK refuses.
 */
export const AGENT_BUDGET_MIN_USD = 0.000001;

export type BudgetStatus = {
  /** USD per UTC calendar month; null: no budget */
  monthlyBudgetUsd: number | null;
  /** USD spent through the gateway since periodStart, rounded to 1e-6 */
  monthToDateUsd: number;
  /** month-to-date cost ≥ budget: the gateway refuses the agent's calls */
  exceeded: boolean;
  /** first day of the current UTC month, YYYY-MM-DD */
  periodStart: string;
};

/** $1.50, or for amounts under a cent the digits that matter ($0.0012). */
export const formatUsd = (n: number) =>
  `$${n === 0 || n >= 0.01 ? n.toFixed(2) : n.toFixed(Math.min(10, 1 - Math.floor(Math.log10(n)))).replace(/0+$/, '')}`;
export const round6 = (n: number) => Math.round(n * 1e6) / 1e6;

/** The gateway's refusal once an agent's month-to-date cost and the calls in flight reached its budget. */
export const budgetExceeded = (budget: number, spent: number, periodStart: string) =>
  new AppError(
    'AGENT_BUDGET_EXCEEDED',
    `This agent's monthly budget of ${formatUsd(budget)} is used up ` +
      `(${formatUsd(spent)} spent since ${periodStart}). Raise it on the agent's Usage tab.`,
    { monthlyBudgetUsd: budget, monthToDateUsd: spent, periodStart },
  );

export function createAgentBudgets(deps: {
  db: Pick<Db, 'withUser'>;
  usage: Pick<UsageStore, 'pendingAgentCost'>;
  /** a budget changed: the spend guard's "no budget" for this agent is stale */
  forget: (agentId: string) => void;
  now: () => Date;
}) {
  const { db, usage, now } = deps;

  const statusOf = (row: BudgetRow | null, agentId: string, month: string): BudgetStatus => {
    const budget = row?.budget == null ? null : Number(row.budget);
    const spent = round6(Number(row?.cost ?? 0) + usage.pendingAgentCost(agentId, month));
    return { monthlyBudgetUsd: budget, monthToDateUsd: spent, exceeded: budget !== null && spent >= budget, periodStart: month };
  };

  /** The owner's view of one agent's budget; 404 for an agent that is not theirs (row-level security). */
  const view = (userId: string, agentId: string): Promise<BudgetStatus> => {
    const month = monthOf(now());
    return db.withUser(userId, async (trx) => {
      if (!(await agentBudgetsRepo.ownedAgent(trx, agentId))) throw notFound('Agent not found');
      return statusOf(await agentBudgetsRepo.ownerView(trx, agentId, month), agentId, month);
    });
  };

  return {
    view,

    /** Sets (a number) or clears (null) an agent's monthly budget; 404 for an agent that is not the caller's. */
    async set(userId: string, agentId: string, usd: number | null): Promise<BudgetStatus> {
      await db.withUser(userId, async (trx) => {
        if (!(await agentBudgetsRepo.ownedAgent(trx, agentId))) throw notFound('Agent not found');
        if (usd === null) await agentBudgetsRepo.remove(trx, agentId);
        else
          await agentBudgetsRepo.upsert(trx, userId, agentId, usd).catch((err: unknown) => {
            // the route's schema keeps amounts within the CHECK; one that still fails it is the caller's amount (§7: 4xx)
            if (isCheckViolation(err))
              throw badRequest(
                `monthlyBudgetUsd: must be at least ${AGENT_BUDGET_MIN_USD.toFixed(6)} and at most ${AGENT_BUDGET_MAX_USD} (USD, kept to 6 decimal places)`,
              );
            throw err;
          });
      });
      // this process's gateway sees the change on the next call; others within the guard's cache TTL
      deps.forget(agentId);
      return view(userId, agentId);
    },
  };
}

export type AgentBudgets = ReturnType<typeof createAgentBudgets>;
