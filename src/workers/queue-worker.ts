/**
 * A loop over a queue of rows in PostgreSQL (security events, Underground bus deliveries). Two
 * shapes of queue use it:
 *
 * - `processNext` works one due row inside the transaction that took it (FOR UPDATE SKIP LOCKED, so
 *   every replica may run the loop and no row is worked by two at once), one at a time. For work
 *   that is quick and local (security events: a few statements).
 * - `claimNext` commits a claim on one due row (a lease in the row, so no other worker takes it
 *   until it expires) and returns the work to do on it, which runs outside any transaction; up to
 *   `concurrency` claimed rows are worked at once. For work that waits on someone else (the bus's
 *   webhook calls): one slow row holds one slot, not the loop, and no pool connection or row lock
 *   is held while it waits. A row whose worker stopped without finishing is claimed again when
 *   its lease expires.
 *
 * Either way the loop takes rows until none is due (or every slot is busy), then polls. `wake`
 * looks at once (a row was just written in this process); a finished row frees its slot and looks
 * again; a row left by a process that stopped, or a retry whose backoff has passed, is found by
 * the next poll of any process.
 */
import type { WorkerLogger } from './deployments.ts';

/** The work on one claimed row; it records its own outcome (and must not throw for a failed row). */
export type ClaimedWork = () => Promise<void>;

type Common = {
  /** names the loop in its error log line */
  name: string;
  logger?: WorkerLogger;
  /** how often an idle worker looks for due rows (retries come due while nobody wakes it) */
  pollMs?: number;
};

export type QueueWorkerOptions = Common &
  (
    | {
        /** works one due row; false when none is due */
        processNext: () => Promise<boolean>;
        claimNext?: never;
        concurrency?: never;
      }
    | {
        /**
         * Commits a claim on one due row and returns its work; undefined when none can be claimed.
         * `signal` aborts when the worker stops: the work gives its row back rather than finishing.
         */
        claimNext: (signal: AbortSignal) => Promise<ClaimedWork | undefined>;
        /** claimed rows worked at once in this process (default 1) */
        concurrency?: number;
        processNext?: never;
      }
  );

/** processNext's row was worked during the "claim": nothing left to run, no slot to hold. */
const DONE: ClaimedWork = async () => {};
const serial = (processNext: () => Promise<boolean>) => async () => ((await processNext()) ? DONE : undefined);

export function createQueueWorker(options: QueueWorkerOptions) {
  const pollMs = options.pollMs ?? 5_000;
  const concurrency = Math.max(1, options.concurrency ?? 1);
  const claimNext = options.processNext ? serial(options.processNext) : options.claimNext;
  let running = false;
  let timer: NodeJS.Timeout | undefined;
  let stopping = new AbortController();
  /** the claiming loop, while it runs (one per process: claims are short) */
  let current: Promise<void> | undefined;
  let again = false;
  const inFlight = new Set<Promise<void>>();

  /** Claims due rows while a slot is free; each claimed row's work runs in the background. */
  async function fill() {
    while (running && inFlight.size < concurrency) {
      const work = await claimNext(stopping.signal);
      if (!work) return;
      if (work === DONE) continue;
      const done: Promise<void> = work()
        .catch((err) => options.logger?.error({ err }, `${options.name} worker job failed`))
        .finally(() => {
          inFlight.delete(done);
          run(); // a slot is free: claim the next due row, if any
        });
      inFlight.add(done);
    }
  }

  function run() {
    if (!running) return;
    if (current) {
      again = true; // woken mid-claim: look once more when this pass ends
      return;
    }
    clearTimeout(timer);
    current = fill()
      .catch((err) => options.logger?.error({ err }, `${options.name} worker poll failed`))
      .finally(() => {
        current = undefined;
        if (again) {
          again = false;
          run();
        } else schedule();
      });
  }

  function schedule() {
    if (!running) return;
    clearTimeout(timer);
    timer = setTimeout(run, pollMs);
    timer.unref();
  }

  return {
    start() {
      if (running) return;
      running = true;
      stopping = new AbortController();
      run();
    },
    /** A row was just written in this process. */
    wake() {
      run();
    },
    /** Stops polling, aborts claimed work (it gives its rows back) and waits for it and the claim in progress. */
    async stop() {
      running = false;
      clearTimeout(timer);
      stopping.abort();
      await current;
      await Promise.all(inFlight);
    },
  };
}
