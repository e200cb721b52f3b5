/**
 * A loop over a queue of rows in PostgreSQL (security events, Underground bus deliveries): it takes
 * due rows one at a time through `processNext` (which takes one FOR UPDATE SKIP LOCKED, so every
 * replica may run the loop and no row is worked by two at once) until none is due, then polls.
 * `wake` looks at once (a row was just written in this process); a row left by a process that
 * stopped, or a retry whose backoff has passed, is found by the next poll of any process.
 */
import type { WorkerLogger } from './deployments.ts';

export type QueueWorkerOptions = {
  /** works one due row; false when none is due */
  processNext: () => Promise<boolean>;
  /** names the loop in its error log line */
  name: string;
  logger?: WorkerLogger;
  /** how often an idle worker looks for due rows (retries come due while nobody wakes it) */
  pollMs?: number;
};

export function createQueueWorker(options: QueueWorkerOptions) {
  const pollMs = options.pollMs ?? 5_000;
  let running = false;
  let timer: NodeJS.Timeout | undefined;
  let current: Promise<void> | undefined;
  let again = false;

  /** Works due rows until none is left. */
  async function drain() {
    while (running && (await options.processNext())) {}
  }

  function run() {
    if (!running) return;
    if (current) {
      again = true; // woken mid-drain: look once more when this drain ends
      return;
    }
    clearTimeout(timer);
    current = drain()
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
    timer = setTimeout(run, pollMs);
    timer.unref();
  }

  return {
    start() {
      if (running) return;
      running = true;
      run();
    },
    /** A row was just written in this process. */
    wake() {
      run();
    },
    /** Stops polling and waits for the row being worked. */
    async stop() {
      running = false;
      clearTimeout(timer);
      await current;
    },
  };
}
