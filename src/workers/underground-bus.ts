/**
 * Delivers Underground bus messages (§4.15): POST /api/underground/bus/send only records the message
 * and its delivery jobs (underground_bus_deliveries, state pending); this loop takes due jobs one at
 * a time from PostgreSQL (FOR UPDATE SKIP LOCKED, so every backend replica may run it and no job is
 * sent by two at once) until none is due, then polls. A send in this process wakes it at once
 * (`wake`); a job left pending by a process that stopped is found by the next poll of any process,
 * and a failed attempt comes due again after its backoff.
 */
import type { BusService } from '../domains/underground/bus.service.ts';
import type { WorkerLogger } from './deployments.ts';
import { createQueueWorker } from './queue-worker.ts';

export type UndergroundBusWorkerOptions = {
  bus: Pick<BusService, 'processNext'>;
  logger?: WorkerLogger;
  /** how often an idle worker looks for due deliveries (retries come due while nobody wakes it) */
  pollMs?: number;
};

export function createUndergroundBusWorker(options: UndergroundBusWorkerOptions) {
  return createQueueWorker({
    name: 'underground bus',
    processNext: () => options.bus.processNext(),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
  });
}
