/**
 * A signed-in user's AI usage and cost (GET /api/usage, the dashboard's usage page). The
 * specification logs usage per user and model (§4.9) but shows no endpoint to read it; this is
 * ours: totals, one entry per UTC day (days without calls included, so a chart has no gaps) and
 * one per model, one per agent and one per API key, over the last `days` days; or the same for one agent (its
 * Usage tab). Read through withUser, so RLS decides whose rows and whose agents.
 */
import type { Db } from '../../db/client.ts';
import { aiRepo, type UsageBucket } from './ai.repo.ts';

export const USAGE_DAYS_MAX = 90;

/**
 * `cost` is what the priced calls cost; `unpricedRequests` counts the calls of a model nobody
 * priced (docs/payments.md "Model calls from the balance"), metered at $0, so a page says
 * "unpriced" for them rather than $0.00.
 */
export type UsageTotals = {
  requests: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  cost: number;
  unpricedRequests: number;
};
export type UsageReport = {
  days: number;
  from: string;
  to: string;
  totals: UsageTotals;
  daily: (UsageTotals & { date: string })[];
  /** `priced`: false when some of the model's calls in the period had no price */
  byModel: (UsageTotals & { model: string; priced: boolean })[];
  /** the caller's agents, most expensive first; empty in one agent's report */
  byAgent: (UsageTotals & { agentId: string; name: string | null })[];
  /** the calls made for each of the caller's API keys, most expensive first; empty in one agent's report */
  byKey: (UsageTotals & { keyId: string; name: string | null })[];
};

const totalsOf = (b: UsageBucket): UsageTotals => ({
  requests: Number(b.requests),
  promptTokens: Number(b.prompt_tokens),
  completionTokens: Number(b.completion_tokens),
  totalTokens: Number(b.total_tokens),
  // USD rounded to 1e-6 for display; the exact numeric stays in the database
  cost: Math.round(Number(b.cost) * 1e6) / 1e6,
  unpricedRequests: Number(b.unpriced_requests),
});
const zero = (): UsageTotals => ({ requests: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0, cost: 0, unpricedRequests: 0 });
const day = (d: Date) => d.toISOString().slice(0, 10);

export function createUsageReport(deps: { db: Db; now?: () => Date }) {
  const now = deps.now ?? (() => new Date());
  /** `agentId`: only that agent's calls (the caller must own it: check first, RLS shows nothing otherwise). */
  return async (userId: string, days: number, agentId?: string): Promise<UsageReport> => {
    const end = now();
    const start = new Date(Date.UTC(end.getUTCFullYear(), end.getUTCMonth(), end.getUTCDate() - (days - 1)));
    const rows = await deps.db.withUser(userId, (trx) => aiRepo.usageReport(trx, start, agentId));
    const byDay = new Map(rows.daily.map((b) => [b.key, totalsOf(b)]));
    const daily: UsageReport['daily'] = [];
    for (let i = 0; i < days; i++) {
      const date = day(new Date(start.getTime() + i * 86_400_000));
      daily.push({ date, ...(byDay.get(date) ?? zero()) });
    }
    const totals = daily.reduce<UsageTotals>(
      (t, d) => ({
        requests: t.requests + d.requests,
        promptTokens: t.promptTokens + d.promptTokens,
        completionTokens: t.completionTokens + d.completionTokens,
        totalTokens: t.totalTokens + d.totalTokens,
        cost: Math.round((t.cost + d.cost) * 1e6) / 1e6,
        unpricedRequests: t.unpricedRequests + d.unpricedRequests,
      }),
      zero(),
    );
    return {
      days,
      from: day(start),
      to: day(end),
      totals,
      daily,
      byModel: rows.byModel.map((b) => ({ model: b.key, ...totalsOf(b), priced: Number(b.unpriced_requests) === 0 })),
      byAgent: rows.byAgent.map((b) => ({ agentId: b.key, name: b.name, ...totalsOf(b) })),
      byKey: rows.byKey.map((b) => ({ keyId: b.key, name: b.name, ...totalsOf(b) })),
    };
  };
}
export type UsageReportFn = ReturnType<typeof createUsageReport>;
