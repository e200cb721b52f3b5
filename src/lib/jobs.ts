/**
 * The words a job of a queue in PostgreSQL is finished with, shared by the job runner
 * (src/workers/job-runner.ts), which decides the outcome of a run, and the domain services whose
 * `finish` records it (deployments, heartbeats, security events, bus deliveries, watchdog
 * notifications).
 */

/** How one run of a claimed job ended. */
export type JobOutcome<R = unknown> =
  /** the run returned `result` */
  | { status: 'succeeded'; result: R }
  /** the run failed and the job is due again after `retryInMs` (this attempt counted) */
  | { status: 'retry'; error: string; retryInMs: number }
  /** the run failed and its retry policy gives the job up: failed for good */
  | { status: 'failed'; error: string }
  /** the runner stopped (or lost the job's lease) before the run ended: the job goes back, due at once, this attempt not counted */
  | { status: 'released' };
