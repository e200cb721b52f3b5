/**
 * The agents domain's numbers for the metrics (docs/metrics.md): agents of every user by status and
 * the deployment queue. Read on the owner connection, across users by design (like the deployment
 * worker), never in a user's RLS transaction.
 */
import type { Db } from '../../db/client.ts';
import type { AgentStatus } from '../../db/schema.ts';
import type { PlatformCounts } from '../../lib/metrics.ts';
import { agentsRepo } from './agents.repo.ts';

/** every status, so a status nobody has reads 0 rather than vanishing from the series */
const STATUSES: Record<AgentStatus, 0> = { pending: 0, provisioning: 0, running: 0, active: 0, stopped: 0, suspended: 0, error: 0 };

/** A scrape waits at most this long for the database (Prometheus' own scrape timeout is 10 s by default). */
export const METRICS_DB_TIMEOUT_MS = 2_000;

/**
 * Reads the counts, failing after `timeoutMs`: the statement timeout bounds the queries, the timer
 * also bounds waiting for a pooled connection when every connection is busy.
 */
export function createPlatformCounts(db: Db, timeoutMs = METRICS_DB_TIMEOUT_MS): () => Promise<PlatformCounts> {
  return async () => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`metrics: database counts took over ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      const read = agentsRepo.platformCounts(db.kysely, timeoutMs);
      read.catch(() => {}); // when the timer wins, the late failure is nobody's to handle
      const r = await Promise.race([read, late]);
      const agents: Record<string, number> = { ...STATUSES };
      for (const row of r.agents) agents[row.status] = row.n;
      return { agents, queuedJobs: r.queued, oldestQueuedSeconds: Math.max(0, r.oldestQueuedSeconds ?? 0) };
    } finally {
      clearTimeout(timer);
    }
  };
}
