/**
 * Delivers Underground bus messages (§4.15): POST /api/underground/bus/send only records the message
 * and its delivery jobs (underground_bus_deliveries, state pending); this loop claims due jobs from
 * PostgreSQL and delivers up to LIMITS.undergroundBusMaxInFlight of them at once (./queue-worker.ts,
 * `claimNext` shape). Each claim is a committed lease on the job, so every backend replica may run
 * the loop and no job is sent by two at once, and no transaction is open while a webhook answers;
 * the claim skips target hosts that already have LIMITS.undergroundBusMaxInFlightPerTarget
 * deliveries in flight, so a webhook that never answers holds two slots, not the bus. A send in
 * this process wakes it at once (`wake`); a job left by a process that stopped is claimed again
 * when its lease passes, and a failed attempt comes due again after its backoff.
 */
import { LIMITS } from '../config/limits.ts';
import type { BusService } from '../domains/underground/index.ts';
import type { WorkerLogger } from './deployments.ts';
import { createQueueWorker } from './queue-worker.ts';

export type UndergroundBusWorkerOptions = {
  bus: Pick<BusService, 'claimNext'>;
  logger?: WorkerLogger;
  /** how often an idle worker looks for due deliveries (retries come due while nobody wakes it) */
  pollMs?: number;
  /** deliveries in flight in this process (default LIMITS.undergroundBusMaxInFlight) */
  concurrency?: number;
};

export function createUndergroundBusWorker(options: UndergroundBusWorkerOptions) {
  return createQueueWorker({
    name: 'underground bus',
    claimNext: (signal) => options.bus.claimNext(signal),
    concurrency: options.concurrency ?? LIMITS.undergroundBusMaxInFlight,
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
  });
}
