/**
 * Delivers Underground bus messages (§4.15) on the job runner (./job-runner.ts): POST
 * /api/underground/bus/send only records the message and its delivery jobs
 * (underground_bus_deliveries, state pending); this job claims due jobs from PostgreSQL and
 * delivers up to LIMITS.undergroundBusMaxInFlight of them at once. Each claim is a committed lease
 * on the job under a token of its own, so every backend replica may run the loop, no job is sent
 * by two at once, and no transaction is open while a webhook answers; the claim skips target hosts
 * that already have LIMITS.undergroundBusMaxInFlightPerTarget deliveries in flight, so a webhook
 * that never answers holds two slots, not the bus. A send in this process wakes it at once
 * (`wake`); a job left by a process that stopped is claimed again when its lease passes, and a
 * failed attempt comes due again after its backoff, until BUS_MAX_ATTEMPTS.
 */
import { LIMITS } from '../config/limits.ts';
import {
  BUS_MAX_ATTEMPTS,
  BUS_MAX_BACKOFF_MS,
  BUS_RETRY_BASE_MS,
  type BusService,
  type ClaimedDelivery,
} from '../domains/underground/index.ts';
import type { Logger } from '../lib/logger.ts';
import type { JobMetrics } from '../lib/metrics.ts';
import { createJobRunner, type JobKind } from './job-runner.ts';

export type UndergroundBusWorkerOptions = {
  bus: Pick<BusService, 'claim' | 'deliver' | 'finish'>;
  logger?: Logger | undefined;
  metrics?: JobMetrics['observer'] | undefined;
  /** how often an idle worker looks for due deliveries (retries come due while nobody wakes it; default 5 s) */
  pollMs?: number | undefined;
  /** first retry delay (default BUS_RETRY_BASE_MS) */
  retryBaseMs?: number | undefined;
  /** deliveries in flight in this process (default LIMITS.undergroundBusMaxInFlight) */
  concurrency?: number | undefined;
};

export function undergroundBusJob(options: UndergroundBusWorkerOptions): JobKind<ClaimedDelivery, void> {
  const { bus } = options;
  return {
    name: 'underground_bus_delivery',
    pollMs: options.pollMs ?? 5_000,
    concurrency: options.concurrency ?? LIMITS.undergroundBusMaxInFlight,
    retry: { baseMs: options.retryBaseMs ?? BUS_RETRY_BASE_MS, maxMs: BUS_MAX_BACKOFF_MS, maxAttempts: BUS_MAX_ATTEMPTS },
    // the lease is the bus service's (its length follows the webhook timeout) under a token per claim
    claim: () => bus.claim(),
    run: (claimed, signal) => bus.deliver(claimed, signal),
    finish: (claimed, outcome) => bus.finish(claimed, outcome),
    // `attempts` already counts this one (the claim counts it)
    attempt: (claimed) => claimed.job.attempts,
    describe: (claimed) => ({ messageId: claimed.job.message_id, deliveryId: claimed.job.id }),
  };
}

export function createUndergroundBusWorker(options: UndergroundBusWorkerOptions) {
  return createJobRunner(undergroundBusJob(options), { logger: options.logger, metrics: options.metrics });
}
