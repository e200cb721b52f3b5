/**
 * The watchdog of one backend process (§3 "Watchdog lifecycle"; docs/watchdog.md). A periodic
 * probe, not a queue, so a loop of its own: every `pollMs` it
 *   - syncs the watched set with the agents table and adopts agents nobody holds (new ones,
 *     released ones, and those of a backend that died: their lease ran out), so each agent is
 *     watched by exactly one backend at a time (`watchdog.leases`);
 *   - runs the checks of its own agents that are due (`watchdog.check` decides and writes).
 * `wake()` polls at once: an agent was made due because its process exited or a call to it failed
 * (watchdog.checkSoon), so the check does not wait for the next tick.
 * Leases are renewed every leaseMs/3 while the process lives; on stop they are released so
 * another backend takes the agents over at once.
 *
 * The §6 notifications the checks write to the PostgreSQL outbox are a queue: they are sent by a
 * job of the job runner (./job-runner.ts), woken after every check, retried with backoff up to
 * `maxNotificationAttempts`.
 */
import { randomUUID } from 'node:crypto';
import type { ClaimedNotification, DueAgent, NotificationChannel, WatchdogService } from '../domains/watchdog/index.ts';
import { type Logger, silentLogger } from '../lib/logger.ts';
import type { JobMetrics } from '../lib/metrics.ts';
import { createJobRunner, type JobKind } from './job-runner.ts';

export type WatchdogWorkerOptions = {
  watchdog: Pick<WatchdogService, 'settings' | 'check' | 'leases' | 'outbox'>;
  channels: NotificationChannel[];
  logger?: Logger | undefined;
  metrics?: JobMetrics['observer'] | undefined;
  holderId?: string;
  /** checks run at once by this process */
  concurrency?: number;
  /** agents adopted per poll */
  adoptBatch?: number;
  /** notification attempts before one is given up (marked failed) */
  maxNotificationAttempts?: number;
};

/** The §6 outbox on the job runner: each notification sent on its channel, 2 s doubling to 5 min between attempts. */
export function watchdogNotificationJob(options: WatchdogWorkerOptions): JobKind<ClaimedNotification, void> {
  const { outbox } = options.watchdog;
  const channels = new Map(options.channels.map((c) => [c.name, c]));
  return {
    name: 'watchdog_notification',
    pollMs: options.watchdog.settings.pollMs,
    // a sender that dies mid-send leaves its notification to be taken again a minute later
    leaseMs: 60_000,
    concurrency: 20,
    retry: { baseMs: 2_000, maxMs: 300_000, maxAttempts: options.maxNotificationAttempts ?? 5 },
    claim: (c) => outbox.claim(c.limit, c.leaseMs),
    async run(n) {
      const channel = channels.get(n.channel);
      if (!channel) throw new Error(`channel ${n.channel} is not configured in this process`);
      await channel.send(n.notice);
    },
    finish: (n, outcome) => outbox.finish(n, outcome),
    attempt: (n) => n.attempts,
    describe: (n) => ({ channel: n.channel, eventId: n.notice.eventId }),
  };
}

export function createWatchdogWorker(options: WatchdogWorkerOptions) {
  const { watchdog } = options;
  const s = watchdog.settings;
  const log = options.logger ?? silentLogger;
  const holder = options.holderId ?? `watchdog-${randomUUID()}`;
  const concurrency = options.concurrency ?? 16;
  const adoptBatch = options.adoptBatch ?? 500;
  const notifications =
    options.channels.length > 0 ? createJobRunner(watchdogNotificationJob(options), { logger: log, metrics: options.metrics }) : undefined;

  let running = false;
  let pollTimer: NodeJS.Timeout | undefined;
  let renewTimer: NodeJS.Timeout | undefined;
  let stopping = new AbortController();
  const inFlight = new Map<string, Promise<unknown>>();
  let polling: Promise<void> | undefined;

  function runCheck(agent: DueAgent) {
    const p = watchdog
      .check(holder, agent, stopping.signal)
      .then((state) => {
        if (state === null) log.info({ agentId: agent.agent_id }, 'watchdog lease lost; another backend has the agent');
        else if (state !== agent.state) log.info({ agentId: agent.agent_id, from: agent.state, to: state }, 'watchdog state changed');
      })
      .catch((err) => log.error({ err, agentId: agent.agent_id }, 'watchdog check failed'))
      .finally(() => {
        inFlight.delete(agent.agent_id);
        // a check may have written notifications: send them now rather than at the next poll
        notifications?.wake();
      });
    inFlight.set(agent.agent_id, p);
  }

  async function pollOnce(): Promise<void> {
    await watchdog.leases.adopt(holder, adoptBatch);
    const free = concurrency - inFlight.size;
    if (free > 0) {
      const due = await watchdog.leases.due(holder, free, [...inFlight.keys()]);
      for (const agent of due) runCheck(agent);
    }
  }

  let wakeAgain = false;
  function poll() {
    polling = pollOnce()
      .catch((err) => log.error({ err }, 'watchdog poll failed'))
      .finally(() => {
        polling = undefined;
        if (wakeAgain && running) {
          wakeAgain = false;
          poll();
        } else schedulePoll();
      });
  }

  function schedulePoll() {
    if (!running) return;
    pollTimer = setTimeout(poll, s.pollMs);
    pollTimer.unref();
  }

  return {
    holderId: holder,
    /** one poll now (tests and benchmarks drive the loop with it) */
    pollOnce,
    /** Polls now rather than at the next tick: an agent was made due (watchdog.checkSoon: its process exited, a call failed). */
    wake() {
      if (!running) return;
      if (polling) {
        wakeAgain = true;
        return;
      }
      clearTimeout(pollTimer);
      poll();
    },
    async start() {
      if (running) return;
      running = true;
      stopping = new AbortController();
      renewTimer = setInterval(
        () => {
          watchdog.leases.renew(holder).catch((err) => log.warn({ err }, 'watchdog lease renewal failed'));
        },
        Math.max(50, Math.floor(s.leaseMs / 3)),
      );
      renewTimer.unref();
      await notifications?.start();
      poll();
    },
    /** Stops polling, lets running checks finish (repairs are cut short), gives the leases back. */
    async stop(options: { release?: boolean } = {}) {
      if (!running) return;
      running = false;
      clearTimeout(pollTimer);
      clearInterval(renewTimer);
      stopping.abort(new Error('watchdog stopping'));
      await polling;
      await Promise.allSettled([...inFlight.values()]);
      await notifications?.stop();
      if (options.release !== false)
        await watchdog.leases.release(holder).catch((err) => log.warn({ err }, 'watchdog lease release failed'));
    },
  };
}
