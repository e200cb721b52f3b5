/**
 * Wiring of the Underground message bus (§4.15): the service behind POST /api/underground/bus/send
 * and the delivery worker every backend process runs beside its other workers (each job claimed
 * with a committed lease, so replicas share the work).
 */

import type { Config } from '../config/env.ts';
import type { Db } from '../db/client.ts';
import { createBusService } from '../domains/underground/index.ts';
import type { Logger } from '../lib/logger.ts';
import type { RateLimiter } from '../lib/rate-limiter.ts';
import { createUndergroundBusWorker } from '../workers/underground-bus.ts';

export type UndergroundBusTimings = { pollMs?: number; retryBaseMs?: number };

export function createUndergroundBus(deps: {
  config: Config;
  db: Db;
  log: Logger;
  /** counts each sending agent's messages (UNDERGROUND_BUS_RATE_LIMIT), across replicas with REDIS_URL */
  rateLimiter: RateLimiter;
  timings?: UndergroundBusTimings | undefined;
}) {
  let worker: ReturnType<typeof createUndergroundBusWorker> | undefined;
  const bus = createBusService({
    db: deps.db,
    allowPrivateWebhooks: deps.config.UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS,
    sendRate: { limiter: deps.rateLimiter, perMinute: deps.config.UNDERGROUND_BUS_RATE_LIMIT },
    logger: deps.log,
    onEnqueued: () => worker?.wake(),
    ...(deps.timings?.retryBaseMs ? { retryBaseMs: deps.timings.retryBaseMs } : {}),
  });
  const jobs = {
    /** Starts this process's delivery worker (backend processes). */
    startWorker() {
      worker ??= createUndergroundBusWorker({
        bus,
        logger: deps.log,
        ...(deps.timings?.pollMs ? { pollMs: deps.timings.pollMs } : {}),
      });
      worker.start();
    },
    get worker() {
      return worker;
    },
    async close() {
      await worker?.stop();
      await bus.close();
    },
  };
  return { bus, jobs };
}
