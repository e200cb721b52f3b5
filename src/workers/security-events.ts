/**
 * Acts on recorded security events (§6): the receivers only verify and record (risc_events, state
 * pending) before answering 202; this loop takes pending events one at a time from PostgreSQL
 * (FOR UPDATE SKIP LOCKED, so every web replica may run it and none acts on an event another holds)
 * until none is due, then polls. A receiver in this process wakes it at once (`wake`); an event
 * recorded by a process that stopped before acting is found by the next poll of any process.
 */
import type { SecurityEventsService } from '../domains/security-events/risc.service.ts';
import type { WorkerLogger } from './deployments.ts';

export type SecurityEventsWorkerOptions = {
  events: Pick<SecurityEventsService, 'processNext'>;
  logger?: WorkerLogger;
  /** how often an idle worker looks for due events (retries come due while nobody wakes it) */
  pollMs?: number;
};

export function createSecurityEventsWorker(options: SecurityEventsWorkerOptions) {
  const pollMs = options.pollMs ?? 5_000;
  let running = false;
  let timer: NodeJS.Timeout | undefined;
  let current: Promise<void> | undefined;
  let again = false;

  /** Processes due events until none is left. */
  async function drain() {
    while (running && (await options.events.processNext())) {}
  }

  function run() {
    if (!running) return;
    if (current) {
      again = true; // woken mid-drain: look once more when this drain ends
      return;
    }
    clearTimeout(timer);
    current = drain()
      .catch((err) => options.logger?.error({ err }, 'security event worker poll failed'))
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
    /** An event was just recorded in this process. */
    wake() {
      run();
    },
    /** Stops polling and waits for the event being acted on. */
    async stop() {
      running = false;
      clearTimeout(timer);
      await current;
    },
  };
}
