/**
 * Acts on recorded security events (§6) on the job runner (./job-runner.ts): the receivers only
 * verify and record (risc_events, state pending) before answering 202; this job claims pending
 * events one at a time from PostgreSQL (FOR UPDATE SKIP LOCKED in a transaction held until the
 * outcome is recorded, so every web replica may run it and none acts on an event another holds).
 * A failed event is tried again after `retryBaseMs`, doubling, up to `maxAttempts`. A receiver in
 * this process wakes it at once (`wake`); an event recorded by a process that stopped before
 * acting is found by the next poll of any process.
 */
import { LIMITS } from '../config/limits.ts';
import type { ClaimedSecurityEvent, SecurityEventsService } from '../domains/security-events/index.ts';
import type { Logger } from '../lib/logger.ts';
import type { JobMetrics } from '../lib/metrics.ts';
import { createJobRunner, type JobKind } from './job-runner.ts';

type Acted = Awaited<ReturnType<SecurityEventsService['act']>>;

export type SecurityEventsWorkerOptions = {
  events: Pick<SecurityEventsService, 'claimDue' | 'act' | 'finish'>;
  logger?: Logger | undefined;
  metrics?: JobMetrics['observer'] | undefined;
  /** how often an idle worker looks for due events (retries come due while nobody wakes it; default 5 s) */
  pollMs?: number | undefined;
  /** a failed event is tried again after this, doubling (default LIMITS.riscRetryBaseMs) */
  retryBaseMs?: number | undefined;
  maxAttempts?: number | undefined;
};

export function securityEventJob(options: SecurityEventsWorkerOptions): JobKind<ClaimedSecurityEvent, Acted> {
  const { events } = options;
  return {
    name: 'security_event',
    pollMs: options.pollMs ?? 5_000,
    // quick, local work (a few statements) under a row lock: one at a time
    concurrency: 1,
    retry: { baseMs: options.retryBaseMs ?? LIMITS.riscRetryBaseMs, maxAttempts: options.maxAttempts ?? LIMITS.riscMaxAttempts },
    claim: () => events.claimDue(),
    run: (event) => events.act(event),
    finish: (event, outcome) => events.finish(event, outcome),
    // `attempts` counts the finished attempts: this run is the next
    attempt: (event) => event.attempts + 1,
    describe: (event) => ({ jti: event.jti }),
  };
}

export function createSecurityEventsWorker(options: SecurityEventsWorkerOptions) {
  return createJobRunner(securityEventJob(options), { logger: options.logger, metrics: options.metrics });
}
