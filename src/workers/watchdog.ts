/**
 * The watchdog loop of one backend process (§3 "Watchdog lifecycle"; docs/watchdog.md). Every
 * `pollMs` it:
 *   - syncs the watched set with the agents table (every agent with status `running` is watched);
 *   - adopts agents nobody holds (new ones, released ones, and those of a backend that died:
 *     their lease ran out), so each agent is watched by exactly one backend at a time;
 *   - runs the checks of its own agents that are due (watchdog.service.ts decides and writes);
 *   - sends pending notifications from the PostgreSQL outbox (§6).
 * Leases are renewed every leaseMs/3 while the process lives; on stop they are released so
 * another backend takes the agents over at once.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../db/client.ts';
import { type NotificationChannel, type WatchdogNotice, type WatchdogService, watchdogRepo } from '../domains/watchdog/index.ts';
import type { WorkerLogger } from './deployments.ts';

export type WatchdogWorkerOptions = {
  db: Db;
  watchdog: WatchdogService;
  channels: NotificationChannel[];
  logger?: WorkerLogger;
  holderId?: string;
  /** checks run at once by this process */
  concurrency?: number;
  /** agents adopted per poll */
  adoptBatch?: number;
  /** notification attempts before one is given up (marked failed) */
  maxNotificationAttempts?: number;
};

const silent: WorkerLogger = { info() {}, warn() {}, error() {} };

export function createWatchdogWorker(options: WatchdogWorkerOptions) {
  const { db, watchdog } = options;
  const s = watchdog.settings;
  const log = options.logger ?? silent;
  const holder = options.holderId ?? `watchdog-${randomUUID()}`;
  const concurrency = options.concurrency ?? 16;
  const adoptBatch = options.adoptBatch ?? 500;
  const maxNotificationAttempts = options.maxNotificationAttempts ?? 5;
  const channels = new Map(options.channels.map((c) => [c.name, c]));

  let running = false;
  let pollTimer: NodeJS.Timeout | undefined;
  let renewTimer: NodeJS.Timeout | undefined;
  let stopping = new AbortController();
  const inFlight = new Map<string, Promise<unknown>>();
  let polling: Promise<void> | undefined;
  let sending: Promise<void> | undefined;

  async function deliver(): Promise<void> {
    if (channels.size === 0) return;
    for (;;) {
      const batch = await watchdogRepo.claimNotifications(db.kysely, 20, 60_000);
      if (batch.length === 0) return;
      await Promise.all(
        batch.map(async (n) => {
          const channel = channels.get(n.channel);
          try {
            if (!channel) throw new Error(`channel ${n.channel} is not configured in this process`);
            await channel.send({ ...(n.payload as Omit<WatchdogNotice, 'eventId'>), eventId: Number(n.event_id) });
            await watchdogRepo.markNotification(db.kysely, n.id, { sent: true });
          } catch (err) {
            const error = (err as Error).message;
            const retryInMs = n.attempts >= maxNotificationAttempts ? null : Math.min(300_000, 1_000 * 2 ** n.attempts);
            await watchdogRepo.markNotification(db.kysely, n.id, { sent: false, error, retryInMs });
            log.warn({ channel: n.channel, eventId: n.event_id, attempt: n.attempts, error }, 'watchdog notification not delivered');
          }
        }),
      );
      if (batch.length < 20) return;
    }
  }

  function runCheck(agent: Parameters<WatchdogService['check']>[1]) {
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
        kickDelivery();
      });
    inFlight.set(agent.agent_id, p);
  }

  function kickDelivery() {
    if (!running || sending || channels.size === 0) return;
    sending = deliver()
      .catch((err) => log.error({ err }, 'watchdog notification delivery failed'))
      .finally(() => {
        sending = undefined;
      });
  }

  async function pollOnce(): Promise<void> {
    await watchdogRepo.sync(db.kysely, holder);
    await watchdogRepo.adopt(db.kysely, holder, s.leaseMs, adoptBatch);
    const free = concurrency - inFlight.size;
    if (free > 0) {
      const due = await watchdogRepo.due(db.kysely, holder, free, [...inFlight.keys()]);
      for (const agent of due) runCheck(agent);
    }
    kickDelivery();
  }

  function schedulePoll() {
    if (!running) return;
    pollTimer = setTimeout(() => {
      polling = pollOnce()
        .catch((err) => log.error({ err }, 'watchdog poll failed'))
        .finally(() => {
          polling = undefined;
          schedulePoll();
        });
    }, s.pollMs);
    pollTimer.unref();
  }

  return {
    holderId: holder,
    /** one poll now (tests and benchmarks drive the loop with it) */
    pollOnce,
    deliver,
    async start() {
      if (running) return;
      running = true;
      stopping = new AbortController();
      renewTimer = setInterval(
        () => {
          watchdogRepo.renew(db.kysely, holder, s.leaseMs).catch((err) => log.warn({ err }, 'watchdog lease renewal failed'));
        },
        Math.max(50, Math.floor(s.leaseMs / 3)),
      );
      renewTimer.unref();
      polling = pollOnce()
        .catch((err) => log.error({ err }, 'watchdog poll failed'))
        .finally(() => {
          polling = undefined;
          schedulePoll();
        });
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
      await sending;
      if (options.release !== false)
        await watchdogRepo.release(db.kysely, holder).catch((err) => log.warn({ err }, 'watchdog lease release failed'));
    },
  };
}
