/**
 * The deployment worker: takes deploy jobs from PostgreSQL with FOR UPDATE SKIP LOCKED, so any
 * number of backends share the queue and never run the same job at once. A job is leased; the
 * holder renews the lease while the driver works, and a job whose lease expired (its worker
 * crashed or was killed mid-deploy) is taken again by the next poll. Finishing is fenced by
 * `locked_by`, so a worker that lost its lease cannot overwrite the new holder's result.
 */
import { randomUUID } from 'node:crypto';
import { LIMITS } from '../config/limits.ts';
import type { Db } from '../db/client.ts';
import { type AgentsService, agentsRepo } from '../domains/agents/index.ts';

export type WorkerLogger = {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
};

export type DeploymentWorkerOptions = {
  db: Db;
  agents: Pick<AgentsService, 'runJob' | 'markFailed' | 'reconcile'>;
  logger?: WorkerLogger;
  /** how often an idle worker looks for work */
  pollMs?: number;
  leaseMs?: number;
  retryBaseMs?: number;
  /** jobs run at once by this worker */
  concurrency?: number;
  workerId?: string;
};

const silent: WorkerLogger = { info() {}, warn() {}, error() {} };

export function createDeploymentWorker(options: DeploymentWorkerOptions) {
  const { db, agents } = options;
  const log = options.logger ?? silent;
  const pollMs = options.pollMs ?? 1_000;
  const leaseMs = options.leaseMs ?? LIMITS.deploymentLeaseMs;
  const retryBaseMs = options.retryBaseMs ?? LIMITS.deploymentRetryBaseMs;
  const concurrency = options.concurrency ?? 4;
  const workerId = options.workerId ?? `worker-${randomUUID()}`;

  let running = false;
  let timer: NodeJS.Timeout | undefined;
  let active = 0;
  const inFlight = new Set<Promise<unknown>>();
  // aborted by stop(): a deploy waiting for health gives its job back instead of holding shutdown
  let stopping = new AbortController();

  /** Takes and runs one job; false when none was due. */
  async function runOnce(): Promise<boolean> {
    const job = await agentsRepo.takeJob(db.kysely, workerId, leaseMs);
    if (!job) return false;
    const heartbeat = setInterval(
      () => {
        agentsRepo
          .renewLease(db.kysely, job.id, workerId, leaseMs)
          .catch((err) => log.warn({ err, jobId: job.id }, 'lease renewal failed'));
      },
      Math.max(50, Math.floor(leaseMs / 3)),
    );
    heartbeat.unref();
    try {
      const r = await agents.runJob(job, stopping.signal);
      await agentsRepo.finishJob(db.kysely, job.id, workerId, { status: 'succeeded' });
      log.info({ jobId: job.id, agentId: job.agent_id, attempt: job.attempts, ...r }, 'deployment finished');
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (stopping.signal.aborted) {
        await agentsRepo.finishJob(db.kysely, job.id, workerId, { status: 'queued', error: 'worker stopped', uncount: true });
        log.info({ jobId: job.id, agentId: job.agent_id }, 'deployment handed back: worker stopping');
      } else if (job.attempts >= job.max_attempts) {
        const owned = await agentsRepo.finishJob(db.kysely, job.id, workerId, { status: 'failed', error: message });
        if (owned) await agents.markFailed(job.agent_id);
        log.error({ err, jobId: job.id, agentId: job.agent_id, attempts: job.attempts }, 'deployment failed');
      } else {
        const retryInMs = retryBaseMs * 2 ** (job.attempts - 1);
        await agentsRepo.finishJob(db.kysely, job.id, workerId, { status: 'queued', error: message, retryInMs });
        log.warn({ err, jobId: job.id, agentId: job.agent_id, attempt: job.attempts, retryInMs }, 'deployment attempt failed; will retry');
      }
    } finally {
      clearInterval(heartbeat);
    }
    return true;
  }

  function schedule(delay: number) {
    if (!running) return;
    clearTimeout(timer);
    timer = setTimeout(pump, delay);
    timer.unref();
  }

  /** Fills free slots with jobs; polls again when the queue is empty. */
  function pump() {
    if (!running) return;
    while (active < concurrency) {
      active++;
      const p = runOnce()
        .catch((err) => {
          log.error({ err }, 'deployment worker poll failed');
          return false;
        })
        .then((took) => {
          active--;
          inFlight.delete(p);
          if (took) pump();
          else schedule(pollMs);
        });
      inFlight.add(p);
      // one taker at a time until it knows there is work: an idle worker issues one query per poll
      if (active >= 1) break;
    }
  }

  return {
    workerId,
    runOnce,
    /** Starts polling; first re-deploys agents that should be running but whose unit is gone. */
    async start() {
      if (running) return;
      running = true;
      stopping = new AbortController();
      await agents.reconcile((msg, extra) => log.info(extra, msg)).catch((err) => log.error({ err }, 'agent reconciliation failed'));
      pump();
    },
    /** Looks for work now (a job was just enqueued in this process). */
    wake() {
      if (running && active === 0) schedule(0);
    },
    /** Stops taking jobs and waits for the running ones. */
    async stop() {
      running = false;
      clearTimeout(timer);
      stopping.abort(new Error('worker stopping'));
      await Promise.allSettled([...inFlight]);
    },
  };
}
