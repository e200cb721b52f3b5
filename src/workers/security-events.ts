/**
 * Acts on recorded security events (§6): the receivers only verify and record (risc_events, state
 * pending) before answering 202; this loop takes pending events one at a time from PostgreSQL
 * (FOR UPDATE SKIP LOCKED, so every web replica may run it and none acts on an event another holds)
 * until none is due, then polls. A receiver in this process wakes it at once (`wake`); an event
 * recorded by a process that stopped before acting is found by the next poll of any process.
 */
import type { SecurityEventsService } from '../domains/security-events/index.ts';
import type { WorkerLogger } from './deployments.ts';
import { createQueueWorker } from './queue-worker.ts';

export type SecurityEventsWorkerOptions = {
  events: Pick<SecurityEventsService, 'processNext'>;
  logger?: WorkerLogger;
  /** how often an idle worker looks for due events (retries come due while nobody wakes it) */
  pollMs?: number;
};

export function createSecurityEventsWorker(options: SecurityEventsWorkerOptions) {
  return createQueueWorker({
    name: 'security event',
    processNext: () => options.events.processNext(),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
  });
}
