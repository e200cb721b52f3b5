/**
 * Usage recording off the response path. Calls queue in memory and are written by one statement
 * per batch (usage rows + monthly rollups together, see ai.repo.ts). A batch is written at most
 * LIMITS.aiUsageFlushMs after its first call arrived, or at once when MAX_BATCH entries are waiting;
 * at most one batch is in flight. Why a window and not the next tick: at one request at a time a
 * write per request ran right beside the next request and added ~0.4 ms to it
 * (docs/benchmarks.md); in a window, requests share one statement, and most of a proxied request's
 * life is spent waiting for the provider, when a write costs it nothing.
 * Calls of one window with the same caller, agent, model, provider and UTC day become one entry
 * (one ai_usage row with a request count, migration 200): a row per call cost PostgreSQL more CPU
 * per proxied call than the proxy's own code under load (docs/benchmarks.md "AI proxy", round 5),
 * and every report sums by day, model and agent, so nothing it shows changes. Tokens are summed as
 * integers and cost in integer 1e-10 USD (each call rounded once, as a row per call was), so sums
 * are exact.
 * Durability: `flush()`/`close()` write everything queued (shutdown loses nothing); a crash can
 * lose the calls of the last window. Quotas count queued entries (`monthlyTokens`), so the window
 * never lets a user past a quota; agent budgets count them the same way (`pendingAgentCost`).
 */
import type { FastifyBaseLogger } from 'fastify';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { aiRepo, costUnitsOf, entryOf, monthOf, type UsageEntry, type UsageRow } from './ai.repo.ts';

export type UsageStore = {
  record(row: UsageRow): void;
  /** tokens used by `userId` in the UTC month containing `at`, including queued rows */
  monthlyTokens(userId: string, at: Date): Promise<number>;
  /** USD of `agentId`'s rows recorded in the UTC month `month` (YYYY-MM-01) and not yet committed (agent budgets) */
  pendingAgentCost(agentId: string, month: string): number;
  /** resolves once every row recorded so far is written */
  flush(): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
};

/** Entries per statement; a larger queue is written in several batches. */
const MAX_BATCH = 500;

/**
 * An entry takes no more calls past these (a new entry opens for the same key): requests fit the
 * column's integer and the cost units stay far inside exact float integers (2^53).
 */
const ENTRY_MAX_REQUESTS = 1_000_000;
const ENTRY_MAX_COST_UNITS = 1e15;

const DAY_MS = 86_400_000;

/** A queued entry and the key it is found by while it still takes calls. */
type Queued = UsageEntry & { key: string };

export function createUsageStore(deps: {
  db: Pick<Db, 'kysely' | 'pool'>;
  logger?: FastifyBaseLogger | undefined;
  /** longest a row waits before its batch is written (default LIMITS.aiUsageFlushMs) */
  flushDelayMs?: number;
}): UsageStore {
  const flushDelayMs = deps.flushDelayMs ?? LIMITS.aiUsageFlushMs;
  const queue: Queued[] = [];
  /** the queued entry of each key that still takes calls (entries leave it when written or full) */
  const open = new Map<string, Queued>();
  /** the batch being written: still counted by monthlyTokens until its statement has committed */
  let writing: Queued[] = [];
  let inFlight: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;

  /** when the oldest queued entry arrived (its window's start) */
  let windowStart = 0;

  /**
   * Writes what is queued when it starts, MAX_BATCH entries per statement. Calls that arrive while
   * it writes wait for their own window: writing them at once (as this did until round 5 of
   * docs/benchmarks.md "AI proxy") kept a statement in flight all the time under load, each with the
   * few calls that arrived during the one before, so the window shared nothing.
   */
  const writeAll = async () => {
    let left = queue.length;
    while (left > 0) {
      const batch = queue.splice(0, Math.min(MAX_BATCH, left));
      left -= batch.length;
      if (queue.length === 0) open.clear();
      else for (const e of batch) if (open.get(e.key) === e) open.delete(e.key);
      writing = batch;
      try {
        await aiRepo.insertUsage(deps.db.pool, batch);
      } catch (err) {
        deps.logger?.error({ err, rows: batch.length }, 'ai usage write failed');
      } finally {
        writing = [];
      }
    }
  };

  const kick = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (inFlight) return;
    inFlight = writeAll().finally(() => {
      inFlight = undefined;
      schedule();
    });
  };

  /** A full batch goes now; otherwise one timer per window, ending flushDelayMs after the window's first call. */
  const schedule = () => {
    if (inFlight || queue.length === 0) return;
    if (queue.length >= MAX_BATCH) kick();
    else timer ??= setTimeout(kick, Math.max(0, windowStart + flushDelayMs - Date.now()));
  };

  return {
    record(row) {
      const cost = costUnitsOf(row.cost);
      const key = `${row.userId}\u0000${row.agentId ?? '\u0001'}\u0000${row.model}\u0000${row.provider}\u0000${Math.floor(row.createdAt.getTime() / DAY_MS)}`;
      const e = open.get(key);
      if (e && e.requests < ENTRY_MAX_REQUESTS && e.costUnits + cost <= ENTRY_MAX_COST_UNITS) {
        e.requests += 1;
        e.promptTokens += row.promptTokens;
        e.completionTokens += row.completionTokens;
        e.totalTokens += row.totalTokens;
        e.costUnits += cost;
        return; // its batch is already scheduled
      }
      const entry: Queued = Object.assign(entryOf(row), { key });
      open.set(key, entry);
      if (queue.length === 0) windowStart = Date.now();
      queue.push(entry);
      schedule();
    },
    async monthlyTokens(userId, at) {
      // queued and in-flight rows first: a batch that commits meanwhile is counted twice (a
      // moment's overcount), never not at all
      let pending = 0;
      for (const r of queue) if (r.userId === userId) pending += r.totalTokens;
      for (const r of writing) if (r.userId === userId) pending += r.totalTokens;
      return pending + (await aiRepo.monthlyTokens(deps.db.kysely, userId, at));
    },
    pendingAgentCost(agentId, month) {
      // counted like monthlyTokens: a batch committing meanwhile may count twice for a moment, never not at all
      let units = 0;
      for (const rows of [queue, writing])
        for (const r of rows) if (r.agentId === agentId && monthOf(r.createdAt) === month) units += r.costUnits;
      return units / 1e10;
    },
    async flush() {
      while (queue.length > 0 || inFlight) {
        if (!inFlight) kick();
        await inFlight;
      }
    },
    ping: () => aiRepo.ping(deps.db.kysely),
    async close() {
      await this.flush();
    },
  };
}
