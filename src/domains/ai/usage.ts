/**
 * Usage recording off the response path. Rows queue in memory and are written by one statement
 * per batch (usage row + monthly rollup together, see ai.repo.ts); a batch forms from whatever
 * arrived during the previous write, so under load many requests share one round trip and a lone
 * request is written on the next tick. At most one batch is in flight. A crash can lose the rows
 * of the batch being formed (milliseconds of traffic); `close()` writes what is queued.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../../db/client.ts';
import { aiRepo, type UsageRow } from './ai.repo.ts';

export type UsageStore = {
  record(row: UsageRow): void;
  /** tokens used by `userId` in the UTC month containing `at`, including queued rows */
  monthlyTokens(userId: string, at: Date): Promise<number>;
  /** resolves once every row recorded so far is written */
  flush(): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
};

/** Rows per statement; a larger queue is written in several batches. */
const MAX_BATCH = 500;

export function createUsageStore(deps: { db: Db; logger?: FastifyBaseLogger | undefined }): UsageStore {
  let queue: UsageRow[] = [];
  let inFlight: Promise<void> | undefined;
  let scheduled = false;

  const writeAll = async () => {
    while (queue.length > 0) {
      const batch = queue.slice(0, MAX_BATCH);
      queue = queue.slice(MAX_BATCH);
      try {
        await aiRepo.insertUsage(deps.db.kysely, batch);
      } catch (err) {
        deps.logger?.error({ err, rows: batch.length }, 'ai usage write failed');
      }
    }
  };

  const kick = () => {
    scheduled = false;
    if (inFlight) return;
    inFlight = writeAll().finally(() => {
      inFlight = undefined;
      if (queue.length > 0) kick();
    });
  };

  return {
    record(row) {
      queue.push(row);
      if (!scheduled && !inFlight) {
        scheduled = true;
        setImmediate(kick);
      }
    },
    async monthlyTokens(userId, at) {
      const pending = queue.filter((r) => r.userId === userId).reduce((s, r) => s + r.totalTokens, 0);
      return pending + (await aiRepo.monthlyTokens(deps.db.kysely, userId, at));
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
