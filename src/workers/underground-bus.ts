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

export type UndergroundBusWorkerOptions = {
  bus: Pick<BusService, 'processNext'>;
  logger?: WorkerLogger;
  /** how often an idle worker looks for due deliveries (retries come due while nobody wakes it) */
  pollMs?: number;
};

export function createUndergroundBusWorker(options: UndergroundBusWorkerOptions) {
  const pollMs = options.pollMs ?? 5_000;
  let running = false;
  let timer: NodeJS.Timeout | undefined;
  let current: Promise<void> | undefined;
  let again = false;

  /** Delivers due jobs until none is left. */
  async function drain() {
    while (running && (await options.bus.processNext())) {}
  }

  function run() {
    if (!running) return;
    if (current) {
      again = true; // woken mid-drain: look once more when this drain ends
      return;
    }
    clearTimeout(timer);
    current = drain()
      .catch((err) => options.logger?.error({ err }, 'underground bus worker poll failed'))
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
    /** A delivery job was just written in this process. */
    wake() {
      run();
    },
    /** Stops polling and waits for the delivery in flight. */
    async stop() {
      running = false;
      clearTimeout(timer);
      await current;
    },
  };
}
