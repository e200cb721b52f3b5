/**
 * Wiring of the Underground message bus (§4.15): the service behind POST /api/underground/bus/send.
 * Its delivery jobs are delivered by the worker every backend process runs beside its other
 * workers (src/workers/underground-bus.ts, started by src/platform.ts `startWorkers`).
 */
import type { Config } from '../config/env.ts';
import type { Db } from '../db/client.ts';
import { isAdminUser } from '../domains/accounts/index.ts';
import { createBusService } from '../domains/underground/index.ts';
import type { RateLimiter } from '../lib/rate-limiter.ts';

/** Test timings of the delivery worker, in ms: its poll and the first retry's delay. */
export type UndergroundBusTimings = { pollMs?: number; retryBaseMs?: number };

export function createUndergroundBus(deps: {
  config: Config;
  db: Db;
  /** counts each sending agent's messages (UNDERGROUND_BUS_RATE_LIMIT), across replicas with REDIS_URL */
  rateLimiter: RateLimiter;
  /** a delivery job was just written: wake this process's worker */
  onEnqueued: () => void;
}) {
  return createBusService({
    db: deps.db,
    allowPrivateWebhooks: deps.config.UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS,
    sendRate: { limiter: deps.rateLimiter, perMinute: deps.config.UNDERGROUND_BUS_RATE_LIMIT },
    // §2 A2A messages/day by the owner's plan; admins (the same rule as everywhere) get network's
    dailyCap: { isAdmin: (owner) => isAdminUser(deps.config, owner) },
    onEnqueued: deps.onEnqueued,
  });
}
