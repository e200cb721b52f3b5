/**
 * Monthly budgets per agent (docs/agents.md "Usage and budgets"): an owner caps what one agent may
 * spend on models through the AI gateway in a UTC calendar month; once the month's cost reaches
 * the cap the gateway refuses the agent's calls before any provider is contacted.
 *
 * The check runs before every model call of every agent, so it is built to cost nothing for an
 * agent without a budget and one indexed read for an agent with one:
 *   - the budget is cached per process for BUDGET_CACHE_TTL_MS; "no budget" is cached too, so an
 *     agent without one costs a database read once per TTL, not per call;
 *   - an agent with a budget reads budget and month-to-date cost in one statement by primary keys
 *     (the per-agent rollup that the usage insert maintains, migration 110), plus the rows this
 *     process has recorded and not yet written (usage.ts).
 * What this allows (documented): calls already in flight when the budget is reached finish and are
 * billed, so concurrent calls may overshoot by at most the calls in flight (across replicas also
 * those recorded in another process's unwritten usage window, LIMITS.aiUsageFlushMs). A budget set
 * here applies at once in this process and within BUDGET_CACHE_TTL_MS in other replicas.
 */
import type { Db } from '../../db/client.ts';
import { AppError, notFound } from '../../lib/errors.ts';
import { agentBudgetsRepo, type BudgetRow } from './agent-budgets.repo.ts';
import { monthOf } from './ai.repo.ts';
import type { UsageStore } from './usage.ts';

/** How long a budget read for the gateway's check is reused (ms): the delay of a change in other replicas. */
const BUDGET_CACHE_TTL_MS = 5_000;
/** Entries before the cache is emptied (one per agent that called within the TTL). */
const BUDGET_CACHE_MAX = 50_000;
/** The highest budget an owner may set (USD per month); the database checks it too (migration 110). */
export const AGENT_BUDGET_MAX_USD = 100_000;

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
  usage: Pick<UsageStore, 'pendingAgentCost'>;
  now: () => Date;
}) {
  const { db, usage, now } = deps;
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

  /** The budget and month-to-date cost read from the database (cached for the next check); the 429 once it is used up. */
  const readAndCheck = async (agentId: string): Promise<void> => {
    const month = monthOf(now());
    const row = await agentBudgetsRepo.budgetAndCost(db.pool, agentId, month);
    const status = statusOf(row, agentId, month);
    remember(agentId, status.monthlyBudgetUsd);
    if (!status.exceeded) return;
    throw new AppError(
      'AGENT_BUDGET_EXCEEDED',
      `This agent's monthly budget of ${formatUsd(status.monthlyBudgetUsd!)} is used up ` +
        `(${formatUsd(status.monthToDateUsd)} spent since ${status.periodStart}). Raise it on the agent's Usage tab.`,
      { monthlyBudgetUsd: status.monthlyBudgetUsd, monthToDateUsd: status.monthToDateUsd, periodStart: status.periodStart },
    );
  };

  return {
    /**
     * The gateway's check before a model call (§4.9 AI layer): throws AGENT_BUDGET_EXCEEDED (429,
     * OpenAI's `insufficient_quota` on the gateway) once the month's cost reached the budget.
     * Undefined, not a promise, for an agent known to have no budget (the common call: the
     * gateway then waits for nothing, docs/benchmarks.md "AI proxy").
     */
    check(agentId: string): Promise<void> | undefined {
      const hit = cache.get(agentId);
      const fresh = hit !== undefined && Date.now() - hit.at < BUDGET_CACHE_TTL_MS;
      if (fresh && hit.budget === null) return undefined;
      return readAndCheck(agentId);
    },

    view,

    /** Sets (a number) or clears (null) an agent's monthly budget; 404 for an agent that is not the caller's. */
    async set(userId: string, agentId: string, usd: number | null): Promise<BudgetStatus> {
      await db.withUser(userId, async (trx) => {
        if (!(await agentBudgetsRepo.ownedAgent(trx, agentId))) throw notFound('Agent not found');
        if (usd === null) await agentBudgetsRepo.remove(trx, agentId);
        else await agentBudgetsRepo.upsert(trx, userId, agentId, usd);
      });
      // this process's gateway sees the change on the next call; others within the TTL
      cache.delete(agentId);
      return view(userId, agentId);
    },
  };
}

export type AgentBudgets = ReturnType<typeof createAgentBudgets>;
