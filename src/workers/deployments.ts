/**
 * The deployment jobs (§4.18, §3 provisioning) on the job runner (./job-runner.ts): any number of
 * backends share the queue in PostgreSQL (claimed FOR UPDATE SKIP LOCKED, never run by two at
 * once). A claimed job is leased; the runner renews the lease while the driver works, and a job
 * whose lease passed (its worker crashed or was killed mid-deploy) is claimed again. Finishing is
 * fenced by the holder, so a worker that lost its lease cannot overwrite the new holder's result.
 * A failed attempt is retried after `retryBaseMs`, doubling, until the job's own `max_attempts`;
 * then the job fails and its agent shows `error`. Before its first claim the worker re-deploys the
 * agents that should run but whose unit is gone (`reconcile`).
 */
import { LIMITS } from '../config/limits.ts';
import type { ClaimedJob, DeploymentJobs, DeployResult } from '../domains/agents/index.ts';
import type { Logger } from '../lib/logger.ts';
import type { JobMetrics } from '../lib/metrics.ts';
import { createJobRunner, type JobKind } from './job-runner.ts';

export type DeploymentWorkerOptions = {
  deployments: Pick<DeploymentJobs, 'claim' | 'renew' | 'runJob' | 'finish' | 'reconcile'>;
  logger?: Logger | undefined;
  metrics?: JobMetrics['observer'] | undefined;
  /** how often an idle worker looks for work (default 1 s) */
  pollMs?: number | undefined;
  leaseMs?: number;
  retryBaseMs?: number;
  /** jobs run at once by this worker (default 4) */
  concurrency?: number;
  workerId?: string;
};

export function deploymentJob(options: DeploymentWorkerOptions): JobKind<ClaimedJob, DeployResult> {
  const { deployments } = options;
  const log = options.logger;
  return {
    name: 'deployment',
    pollMs: options.pollMs ?? 1_000,
    leaseMs: options.leaseMs ?? LIMITS.deploymentLeaseMs,
    concurrency: options.concurrency ?? 4,
    retry: { baseMs: options.retryBaseMs ?? LIMITS.deploymentRetryBaseMs, maxAttempts: (job) => job.max_attempts },
    claim: (c) => deployments.claim(c.holder, c.leaseMs, c.limit),
    renew: (job, c) => deployments.renew(job, c.holder, c.leaseMs),
    run: (job, signal) => deployments.runJob(job, signal),
    async finish(job, outcome, holder) {
      const owned = await deployments.finish(job, holder, outcome);
      if (owned && outcome.status === 'succeeded') {
        log?.info({ jobId: job.id, agentId: job.agent_id, attempt: job.attempts, ...outcome.result }, 'deployment finished');
        // provisioning asked for a repository and the agent runs without one: said once, with git's reason
        if (!outcome.result.skipped && outcome.result.repositoryError)
          log?.warn(
            { agentId: job.agent_id, reason: outcome.result.repositoryError },
            'the workspace was not made a git repository as provisioning asked',
          );
      }
      return owned;
    },
    attempt: (job) => job.attempts,
    describe: (job) => ({ jobId: job.id, agentId: job.agent_id }),
    async onStart() {
      await deployments.reconcile((msg, extra) => log?.info(extra, msg));
    },
  };
}

export function createDeploymentWorker(options: DeploymentWorkerOptions) {
  return createJobRunner(deploymentJob(options), { logger: options.logger, metrics: options.metrics, holder: options.workerId });
}
