/**
 * The one runner of the job queues in PostgreSQL (docs/architecture.md "Workers"): deployments,
 * heartbeats, Underground bus deliveries, security events and watchdog notifications are each a
 * job kind — how to claim due jobs, run one, renew its lease, record its outcome, and the retry
 * policy — and this runner does the rest the same way for all of them:
 *
 * - It claims due jobs while one of its `concurrency` slots is free. The claim is the kind's
 *   (a domain service method): FOR UPDATE SKIP LOCKED, so every replica may run the loop and no
 *   job is claimed twice, with a lease in the row (`holder`, `leaseMs`) where the work outlives
 *   the claiming statement; a job whose holder died is claimed again when its lease has passed.
 * - Each claimed job runs in the background; the runner renews its lease every third of
 *   `leaseMs` while it runs, and aborts it when the lease is lost (another holder has the job:
 *   the kind's finish is fenced by the holder and changes nothing).
 * - A run that returns succeeded; one that throws is retried after an exponential backoff, or
 *   given up after its last attempt (`retry`); the kind records the outcome (`finish`).
 * - Idle, it polls every `pollMs` (retries come due, leases pass); `wake()` looks at once (a job
 *   was just enqueued in this process); a finished job frees its slot and looks again.
 * - `stop()` aborts the running jobs' signal: a run that ends because of it, or a job claimed as
 *   the stop came, is given back (due at once, the attempt not counted); it then waits for them.
 *
 * Every outcome is logged (a success at debug) and observed by the job metrics (docs/metrics.md).
 */
import { randomUUID } from 'node:crypto';
import type { JobOutcome } from '../lib/jobs.ts';
import { type Logger, silentLogger } from '../lib/logger.ts';
import type { JobMetrics, JobRunOutcome } from '../lib/metrics.ts';

export type { JobOutcome };

/**
 * Exponential backoff: the attempt numbered n (from 1) that fails is retried after
 * `baseMs * 2^(n-1)`, at most `maxMs`; the attempt numbered `maxAttempts` that fails gives the job up.
 */
export type RetryPolicy<J> = {
  baseMs: number;
  maxMs?: number;
  /** a number, or the job's own (a column of its row) */
  maxAttempts: number | ((job: J) => number);
};

export type ClaimContext = { holder: string; leaseMs: number; limit: number };

export type JobKind<J, R = unknown> = {
  /** names the kind in log lines (`job`) and in the metrics' `job` label */
  name: string;
  /** claims up to `limit` due jobs for `holder`: a committed lease of `leaseMs`, or a row lock the job holds until it is finished */
  claim(c: ClaimContext): Promise<J[]>;
  /** the work; throws on failure. `signal` aborts when the runner stops or loses the job's lease. */
  run(job: J, signal: AbortSignal): Promise<R>;
  /** records the outcome; false when `holder` no longer held the job (fenced: nothing was written) */
  finish(job: J, outcome: JobOutcome<R>, holder: string): Promise<boolean>;
  /** extends a running job's lease; false when another holder has taken it. Absent: the lease outlasts any run. */
  renew?(job: J, c: { holder: string; leaseMs: number }): Promise<boolean>;
  /** the number of the attempt a run of the job is (1 for the first) */
  attempt(job: J): number;
  /** absent: a run that throws gives the job up at once */
  retry?: RetryPolicy<J>;
  /** fields that name the job in log lines */
  describe?(job: J): Record<string, unknown>;
  /** runs before the first claim of `start()` (deployments: the start-up reconciliation) */
  onStart?(): Promise<void>;
  /** how often an idle runner looks for due jobs */
  pollMs: number;
  /** the lease a claim takes (default 60 s) */
  leaseMs?: number;
  /** jobs run at once by one runner (default 1) */
  concurrency?: number;
};

export type JobRunnerOptions = {
  logger?: Logger | undefined;
  metrics?: JobMetrics['observer'] | undefined;
  /** the holder written into the jobs this runner claims (default: the kind's name and a random id) */
  holder?: string | undefined;
};

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

export function createJobRunner<J, R>(kind: JobKind<J, R>, options: JobRunnerOptions = {}) {
  const log = options.logger ?? silentLogger;
  const holder = options.holder ?? `${kind.name}-${randomUUID()}`;
  const leaseMs = kind.leaseMs ?? 60_000;
  const concurrency = Math.max(1, kind.concurrency ?? 1);
  const fields = (job: J) => ({ job: kind.name, ...kind.describe?.(job) });

  let running = false;
  let timer: NodeJS.Timeout | undefined;
  let stopping = new AbortController();
  /** the claiming pass, while one runs (one at a time per runner: claims are short) */
  let claiming: Promise<void> | undefined;
  let again = false;
  const inFlight = new Set<Promise<void>>();

  /** What a failed run leads to under the kind's retry policy. */
  function afterFailure(job: J, err: unknown): JobOutcome<R> {
    const error = errorText(err);
    const policy = kind.retry;
    const attempt = kind.attempt(job);
    const max = policy === undefined ? 1 : typeof policy.maxAttempts === 'number' ? policy.maxAttempts : policy.maxAttempts(job);
    if (!policy || attempt >= max) return { status: 'failed', error };
    return { status: 'retry', error, retryInMs: Math.min(policy.maxMs ?? Number.POSITIVE_INFINITY, policy.baseMs * 2 ** (attempt - 1)) };
  }

  /** Renews the job's lease while it runs; aborts `lost` when another holder has it. */
  function keepLease(job: J, lost: AbortController): NodeJS.Timeout | undefined {
    const renew = kind.renew;
    if (!renew) return undefined;
    const timer = setInterval(
      () => {
        renew(job, { holder, leaseMs }).then(
          (held) => {
            if (!held) lost.abort(new Error(`${kind.name}: lease lost to another holder`));
          },
          (err) => log.warn({ err, ...fields(job) }, 'job lease renewal failed'),
        );
      },
      Math.max(50, Math.floor(leaseMs / 3)),
    );
    timer.unref();
    return timer;
  }

  function report(job: J, outcome: JobOutcome<R>, held: boolean, err: unknown, seconds: number) {
    const f = { ...fields(job), attempt: kind.attempt(job) };
    let observed: JobRunOutcome;
    if (!held) {
      observed = 'lost';
      log.warn(f, 'job outcome not recorded: another holder has the job');
    } else if (outcome.status === 'succeeded') {
      observed = 'succeeded';
      log.debug(f, 'job succeeded');
    } else if (outcome.status === 'retry') {
      observed = 'retried';
      log.warn({ ...f, err, retryInMs: outcome.retryInMs }, 'job attempt failed; will retry');
    } else if (outcome.status === 'failed') {
      observed = 'failed';
      log.error({ ...f, err }, 'job failed for good');
    } else {
      observed = 'released';
      log.info(f, 'job handed back: runner stopping');
    }
    options.metrics?.onJobRun(kind.name, observed, seconds);
  }

  /** Runs one claimed job to its recorded outcome; never throws. */
  async function execute(job: J, stop: AbortSignal): Promise<void> {
    const started = performance.now();
    const lost = new AbortController();
    const signal = AbortSignal.any([stop, lost.signal]);
    const renewal = keepLease(job, lost);
    let outcome: JobOutcome<R>;
    let err: unknown;
    try {
      // a job claimed as the runner stopped is given back without running
      outcome = signal.aborted ? { status: 'released' } : { status: 'succeeded', result: await kind.run(job, signal) };
    } catch (e) {
      err = e;
      outcome = signal.aborted ? { status: 'released' } : afterFailure(job, e);
    } finally {
      clearInterval(renewal);
    }
    try {
      const held = await kind.finish(job, outcome, holder);
      report(job, outcome, held, err, (performance.now() - started) / 1000);
    } catch (e) {
      // not recorded: the job stays claimed until its lease passes, then it is claimed again
      log.error({ err: e, ...fields(job) }, 'job outcome not recorded');
    }
  }

  function track(p: Promise<void>) {
    const done = p.finally(() => {
      inFlight.delete(done);
      run(); // a slot is free: claim the next due job, if any
    });
    inFlight.add(done);
  }

  /** Claims due jobs while a slot is free; each claimed job runs in the background. */
  async function fill() {
    while (running && inFlight.size < concurrency) {
      const jobs = await kind.claim({ holder, leaseMs, limit: concurrency - inFlight.size });
      if (jobs.length === 0) return;
      for (const job of jobs) track(execute(job, stopping.signal));
    }
  }

  function run() {
    if (!running) return;
    if (claiming) {
      again = true; // woken mid-claim: look once more when this pass ends
      return;
    }
    clearTimeout(timer);
    claiming = fill()
      .catch((err) => log.error({ err, job: kind.name }, 'job claim failed'))
      .finally(() => {
        claiming = undefined;
        if (again) {
          again = false;
          run();
        } else schedule();
      });
  }

  function schedule() {
    if (!running) return;
    clearTimeout(timer);
    timer = setTimeout(run, kind.pollMs);
    timer.unref();
  }

  return {
    name: kind.name,
    holder,
    /** Starts claiming (after the kind's `onStart`). */
    async start() {
      if (running) return;
      running = true;
      stopping = new AbortController();
      if (kind.onStart) await kind.onStart().catch((err) => log.error({ err, job: kind.name }, 'job runner start-up failed'));
      run();
    },
    /** A job was just enqueued in this process: look now rather than at the next poll. */
    wake() {
      run();
    },
    /**
     * One claim of up to `concurrency` due jobs, run to their recorded outcomes; how many were
     * claimed. For tests and benchmarks, on a runner that is not started.
     */
    async runOnce(): Promise<number> {
      const jobs = await kind.claim({ holder, leaseMs, limit: concurrency });
      await Promise.all(jobs.map((job) => execute(job, stopping.signal)));
      return jobs.length;
    },
    /** Stops claiming, aborts the running jobs (they are given back) and waits for them and the claim in progress. */
    async stop() {
      running = false;
      clearTimeout(timer);
      stopping.abort(new Error(`${kind.name} runner stopping`));
      await claiming;
      await Promise.allSettled([...inFlight]);
    },
  };
}

/** Something started with the platform and stopped with it: a job runner, or the watchdog's probe loop. */
export type Worker = { start(): Promise<void>; stop(): Promise<void> };

/** The workers of one process, started in order and stopped together. */
export function createWorkerCatalog<T extends Record<string, Worker>>(workers: T) {
  return {
    ...workers,
    async start() {
      for (const w of Object.values(workers)) await w.start();
    },
    async stop() {
      await Promise.all(Object.values(workers).map((w) => w.stop()));
    },
  };
}
