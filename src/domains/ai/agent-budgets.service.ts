/**
 * Monthly budgets per agent (docs/agents.md "Usage and budgets"): an owner caps what one agent may
 * spend on models through the AI gateway in a UTC calendar month; the gateway refuses the agent's
 * calls before any provider is contacted once the month's cost and the calls in flight reach it.
 *
 * Each call holds the most it can cost before it starts (spend-holds.service.ts, migration 205): the
 * budget admits a call while the month's cost plus every call in flight is below it, so however
 * many calls run at once the budget is overshot by at most one call's hold, across replicas too.
 * The check runs before every model call of every agent, so it costs nothing for an agent without
 * a budget: "no budget" is cached per process for BUDGET_CACHE_TTL_MS (the delay before a budget
 * set in another replica applies), and an agent with one costs one statement (hold_agent_budget).
 */
import type { Db } from '../../db/client.ts';
import { isCheckViolation } from '../../db/errors.ts';
import { AppError, badRequest, notFound } from '../../lib/errors.ts';
import { agentBudgetsRepo, type BudgetRow } from './agent-budgets.repo.ts';
import { monthOf, type SpendHold, unitsToDecimal } from './ai.repo.ts';
import { spendHoldsRepo } from './spend-holds.repo.ts';
import type { SpendHolds } from './spend-holds.service.ts';
import type { UsageStore } from './usage-store.service.ts';

/** How long a budget read for the gateway's check is reused (ms): the delay of a change in other replicas. */
const BUDGET_CACHE_TTL_MS = 5_000;
/** Entries before the cache is emptied (one per agent that called within the TTL). */
const BUDGET_CACHE_MAX = 50_000;
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
const formatUsd = (n: number) =>
  `$${n === 0 || n >= 0.01 ? n.toFixed(2) : n.toFixed(Math.min(10, 1 - Math.floor(Math.log10(n)))).replace(/0+$/, '')}`;
const round6 = (n: number) => Math.round(n * 1e6) / 1e6;

export function createAgentBudgets(deps: {
  db: Pick<Db, 'pool' | 'withUser'>;
  usage: Pick<UsageStore, 'pendingAgentCost' | 'written'>;
  holds: Pick<SpendHolds, 'holder' | 'ttlMs' | 'taken'>;
  now: () => Date;
}) {
  const { db, usage, holds, now } = deps;
  /** agent id → its budget (null: none) as last read, and when */
  const cache = new Map<string, { budget: number | null; at: number }>();

  const remember = (agentId: string, budget: number | null) => {
    if (cache.size >= BUDGET_CACHE_MAX) cache.clear();
    cache.set(agentId, { budget, at: Date.now() });
  };

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

  const exceeded = (budget: number, spent: number, periodStart: string) =>
    new AppError(
      'AGENT_BUDGET_EXCEEDED',
      `This agent's monthly budget of ${formatUsd(budget)} is used up ` +
        `(${formatUsd(spent)} spent since ${periodStart}). Raise it on the agent's Usage tab.`,
      { monthlyBudgetUsd: budget, monthToDateUsd: spent, periodStart },
    );

  /** Holds `units` of the agent's budget (one statement); the 429 once the month's cost and the calls in flight reach it. */
  const take = async (agentId: string, units: number): Promise<SpendHold | undefined> => {
    // this agent's ended calls whose holds still wait in the usage window: written first, so the
    // budget counts what they cost, not what they held (a call right after another is not refused
    // for the other's hold)
    await usage.written(`agent:${agentId}`);
    const period = monthOf(now());
    const row = await spendHoldsRepo.holdAgentBudget(db.pool, agentId, period, holds.holder, unitsToDecimal(units), holds.ttlMs);
    const budget = row.budget === null ? null : Number(row.budget);
    remember(agentId, budget);
    if (budget === null) return undefined;
    if (!row.admitted) throw exceeded(budget, round6(Number(row.spent) + usage.pendingAgentCost(agentId, period)), period);
    const hold = { scope: `agent:${agentId}`, period, units };
    holds.taken(hold);
    return hold;
  };

  return {
    /**
     * The gateway's hold before a model call (§4.9 AI layer): `units()` (1e-10 USD) is the most the
     * call can cost; resolves to the hold to release with the call's usage, or undefined when the
     * agent has no budget. Rejects with AGENT_BUDGET_EXCEEDED (429, OpenAI's `insufficient_quota`
     * on the gateway) once the month's cost and the calls in flight reached the budget.
     * Undefined, not a promise, for an agent known to have no budget (the common call: the gateway
     * then waits for nothing and estimates nothing, docs/benchmarks.md "AI proxy").
     */
    hold(agentId: string, units: () => number): Promise<SpendHold | undefined> | undefined {
      const hit = cache.get(agentId);
      const fresh = hit !== undefined && Date.now() - hit.at < BUDGET_CACHE_TTL_MS;
      if (fresh && hit.budget === null) return undefined;
      return take(agentId, units());
    },

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
      // this process's gateway sees the change on the next call; others within the TTL
      cache.delete(agentId);
      return view(userId, agentId);
    },
  };
}

export type AgentBudgets = ReturnType<typeof createAgentBudgets>;
