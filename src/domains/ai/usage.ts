/**
 * Usage recording off the response path. Rows queue in memory and are written by one statement
 * per batch (usage row + monthly rollup together, see ai.repo.ts). A batch is written at most
 * LIMITS.aiUsageFlushMs after its first row arrived, or at once when MAX_BATCH rows are waiting;
 * at most one batch is in flight. Why a window and not the next tick: at one request at a time a
 * write per request ran right beside the next request and added ~0.4 ms to it
 * (docs/benchmarks.md); in a window, requests share one statement, and most of a proxied request's
 * life is spent waiting for the provider, when a write costs it nothing.
 * Durability: `flush()`/`close()` write everything queued (shutdown loses nothing); a crash can
 * lose the rows of the last window. Quotas count queued rows (`monthlyTokens`), so the window
 * never lets a user past a quota; agent budgets count them the same way (`pendingAgentCost`).
 */
import type { FastifyBaseLogger } from 'fastify';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { aiRepo, monthOf, type UsageRow } from './ai.repo.ts';

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

/** Rows per statement; a larger queue is written in several batches. */
const MAX_BATCH = 500;

export function createUsageStore(deps: {
  db: Pick<Db, 'kysely' | 'pool'>;
  logger?: FastifyBaseLogger | undefined;
  /** longest a row waits before its batch is written (default LIMITS.aiUsageFlushMs) */
  flushDelayMs?: number;
}): UsageStore {
  const flushDelayMs = deps.flushDelayMs ?? LIMITS.aiUsageFlushMs;
  const queue: UsageRow[] = [];
  /** the batch being written: still counted by monthlyTokens until its statement has committed */
  let writing: UsageRow[] = [];
  let inFlight: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;

  const writeAll = async () => {
    while (queue.length > 0) {
      const batch = queue.splice(0, MAX_BATCH);
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

  /** A full batch goes now; otherwise one timer per window, started by the window's first row. */
  const schedule = () => {
    if (inFlight || queue.length === 0) return;
    if (queue.length >= MAX_BATCH) kick();
    else timer ??= setTimeout(kick, flushDelayMs);
  };

  return {
    record(row) {
      queue.push(row);
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
      let cost = 0;
      for (const rows of [queue, writing])
        for (const r of rows) if (r.agentId === agentId && monthOf(r.createdAt) === month) cost += r.cost;
      return cost;
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
