/**
 * The watchdog's decisions (§3 "Watchdog lifecycle", §8 watchdog defaults): one `check` of one
 * agent probes it and moves it through starting → running → degraded → repairing → crash_loop,
 * repairing it through the hosting driver (stop the gateway, wait, start it, wait for health,
 * verify). State, history and notifications are written to PostgreSQL by watchdog.repo.ts; the
 * loop that decides which agents this process checks is src/workers/watchdog.ts, through `leases`
 * and `outbox` (watchdog-work.service.ts). docs/watchdog.md describes the states and the repair.
 * Length: one state machine (§3) whose transitions, repairs and notifications are read together.
 */
import type { Config } from '../../config/env.ts';
import type { Db } from '../../db/client.ts';
import { AppError } from '../../lib/errors.ts';
import {
  AgentNotDeployedError,
  type ContainerStatus,
  containerHealth,
  type HostingDriver,
  HostingUnavailableError,
  probeHealthz,
} from '../agents/index.ts';
import type { NotificationChannelName, WatchdogNotice } from './notifier.client.ts';
import { type CheckPatch, type DueAgent, type NewEvent, watchdogRepo } from './watchdog.repo.ts';
import type { WatchdogState } from './watchdog.types.ts';
import { createWatchdogWork } from './watchdog-work.service.ts';

/** Every timing and threshold of the watchdog, in milliseconds where it is a time. */
export type WatchdogSettings = {
  /** §8 check interval of a running agent (WATCHDOG_CHECK_INTERVAL, 120 s) */
  checkIntervalMs: number;
  /** §8 check interval of a degraded (or starting, repairing) agent (WATCHDOG_DEGRADED_CHECK_INTERVAL, 5 s) */
  degradedIntervalMs: number;
  /** §8 failed probes of a starting agent before it counts as degraded (3) */
  startupFailureThreshold: number;
  /** §8 repairs before the agent is declared in a crash loop (2) */
  maxRepairAttempts: number;
  /** §8 crash-loop window (5 min) and threshold (3 crashes) */
  crashLoopWindowMs: number;
  crashLoopThreshold: number;
  /** §8 WATCHDOG_AUTO_REPAIR */
  autoRepair: boolean;
  /** §4.12 / §8 health probe timeout (5 s) */
  probeTimeoutMs: number;
  /** §3 repair: wait after stopping the gateway (5 s) */
  repairStopWaitMs: number;
  /** §3 repair: how long the restarted gateway has to answer /healthz (30 s) */
  repairVerifyTimeoutMs: number;
  /** how long a backend holds an agent without renewing its lease */
  leaseMs: number;
  /** how often a backend looks for due checks, agents to adopt and notifications to send */
  pollMs: number;
};

export function watchdogSettingsFromConfig(config: Config): WatchdogSettings {
  return {
    checkIntervalMs: config.WATCHDOG_CHECK_INTERVAL * 1000,
    degradedIntervalMs: config.WATCHDOG_DEGRADED_CHECK_INTERVAL * 1000,
    startupFailureThreshold: config.WATCHDOG_STARTUP_FAILURE_THRESHOLD,
    maxRepairAttempts: config.WATCHDOG_MAX_REPAIR_ATTEMPTS,
    crashLoopWindowMs: config.WATCHDOG_CRASH_LOOP_WINDOW * 1000,
    crashLoopThreshold: config.WATCHDOG_CRASH_LOOP_THRESHOLD,
    autoRepair: config.WATCHDOG_AUTO_REPAIR,
    probeTimeoutMs: config.WATCHDOG_PROBE_TIMEOUT_MS,
    repairStopWaitMs: config.WATCHDOG_REPAIR_STOP_WAIT_MS,
    repairVerifyTimeoutMs: config.WATCHDOG_REPAIR_VERIFY_TIMEOUT_MS,
    leaseMs: config.WATCHDOG_LEASE_MS,
    pollMs: config.WATCHDOG_POLL_MS,
  };
}

/** A failed call to an agent makes it due at most this often (per agent and process): a chat retried in a loop is one check. */
export const CHECK_SOON_GAP_MS = 10_000;

/** Container states that mean the agent's process is gone: each sighting is a crash. */
const CRASHED = new Set<ContainerStatus>(['error', 'stopped', 'not_found']);

type Probe =
  | { healthy: true; url?: string | undefined }
  | { healthy: false; unknown?: boolean; crashed: boolean; container?: ContainerStatus; detail: string };

/**
 * What the watchdog needs of the agents domain, given to it (docs/architecture.md "Design rules":
 * domains depend on each other through what they are given, not on another domain's repository).
 */
export type WatchdogAgents = {
  /** the user's agent, or a 404 AppError (row-level security decides) */
  findOwn(userId: string, agentId: string): Promise<unknown>;
  /** records where the agent's gateway answers now (the driver may have moved it) */
  setGatewayUrl(agentId: string, url: string): Promise<void>;
  /**
   * Starts a repair's relaunch only while the agent is still meant to run, as one lifecycle
   * transition with the owner's Stop and Restart (the agents domain's lifecycle locks): undefined
   * when it no longer is (nothing started).
   */
  relaunchIfRunning(agentId: string, relaunch: () => Promise<void>): Promise<{ done: Promise<void> } | undefined>;
  /** whether the agent's record still says `running` (an idle agent is put to sleep: docs/agents.md "Idle agents sleep") */
  meantToRun(agentId: string): Promise<boolean>;
};

export type WatchdogDeps = {
  db: Db;
  driver: HostingDriver;
  agents: WatchdogAgents;
  settings: WatchdogSettings;
  /** names of the notification channels configured (an outbox row is written per channel) */
  channels: NotificationChannelName[];
  /**
   * deploys the agent again when the driver has nothing to restart (a local process gone with a
   * platform restart), only while it is meant to run (`skipped` otherwise)
   */
  redeploy?: (agent: { agent_id: string; user_id: string }, signal?: AbortSignal) => Promise<{ skipped: boolean }>;
  /** tells this process's watchdog loop that an agent was made due (checkSoon), so it polls now */
  wake?: () => void;
  /** §3 container health: probes before a running unit counts as `starting`, and the wait between them */
  containerHealth?: { retries: number; intervalMs: number };
  /** false when no hosting driver is configured (container health answers 500 `Hosting unavailable`) */
  hostingAvailable?: () => boolean;
};

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (ms <= 0 || signal?.aborted) return resolve();
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });

const CONTAINER_WORDS: Partial<Record<ContainerStatus, string>> = {
  error: 'the gateway process exited unexpectedly',
  stopped: 'the gateway is not running',
  not_found: 'the hosting platform has no unit for the agent',
  suspended: 'the gateway is suspended (stopped) while it should run',
};
const describeContainer = (s: ContainerStatus) => CONTAINER_WORDS[s] ?? 'the health endpoint did not answer';

/** The §6 event a history row is notified as. */
function noticeEvent(e: NewEvent): string {
  if (e.kind === 'repair') return 'repair_attempt';
  return e.to === 'crash_loop' ? 'crash_loop' : 'degraded';
}

export function createWatchdogService(deps: WatchdogDeps) {
  const { db, driver, settings: s } = deps;
  const work = createWatchdogWork({ db, leaseMs: s.leaseMs });

  async function probe(agent: DueAgent): Promise<Probe> {
    // the cheap path: the gateway URL the driver reported at deploy answers /healthz (§4.12, 5 s timeout)
    if (agent.gateway_url && (await probeHealthz(agent.gateway_url, s.probeTimeoutMs))) return { healthy: true };
    let st: { status: ContainerStatus; url?: string };
    try {
      st = await driver.status(agent.agent_id);
    } catch (err) {
      // the hosting platform cannot be asked: nothing is known about the agent; never repair blind
      if (err instanceof HostingUnavailableError)
        return { healthy: false, unknown: true, crashed: false, detail: 'hosting platform unreachable' };
      throw err;
    }
    if (st.status === 'healthy') return { healthy: true, url: st.url };
    // put to sleep (or stopped) since it came due: not broken, and not watched once the next sync sees its record
    if ((st.status === 'suspended' || st.status === 'stopped') && !(await deps.agents.meantToRun(agent.agent_id)))
      return { healthy: false, unknown: true, crashed: false, detail: 'asleep' };
    // the unit moved (a restart took another port): probe where the driver says it is now
    if (
      st.url &&
      st.url !== agent.gateway_url &&
      (st.status === 'running' || st.status === 'starting') &&
      (await probeHealthz(st.url, s.probeTimeoutMs))
    ) {
      return { healthy: true, url: st.url };
    }
    return { healthy: false, crashed: CRASHED.has(st.status), container: st.status, detail: describeContainer(st.status) };
  }

  const payloadOf =
    (agent: DueAgent) =>
    (e: NewEvent, at: Date): Omit<WatchdogNotice, 'eventId'> => ({
      event: noticeEvent(e),
      agentId: agent.agent_id,
      state: e.to ?? null,
      previousState: e.from ?? null,
      attempt: e.attempt ?? null,
      maxAttempts: e.kind === 'repair' ? s.maxRepairAttempts : null,
      ok: e.ok ?? null,
      detail: e.detail ?? null,
      at: at.toISOString(),
    });

  /** Writes a check's outcome (fenced by the lease); false when this process lost the agent. */
  const apply = (holder: string, agent: DueAgent, patch: CheckPatch, events: NewEvent[]) =>
    watchdogRepo.applyCheck(db.kysely, holder, agent, patch, events, deps.channels, payloadOf(agent));

  async function refreshUrl(agentId: string, url: string | undefined, known: string | null) {
    if (url && url !== known) await deps.agents.setGatewayUrl(agentId, url);
  }

  /**
   * One repair (§3): stop the gateway, wait, start it, then give it up to the verify timeout to
   * answer /healthz. Never throws: a failure is an outcome.
   */
  async function runRepair(
    agent: DueAgent,
    signal?: AbortSignal,
  ): Promise<{ ok: boolean; detail: string; crashed: boolean; skipped?: boolean; url?: string | undefined }> {
    const stoppedMeanwhile = { ok: false, crashed: false, skipped: true, detail: 'the agent was stopped meanwhile: no repair' };
    try {
      if (driver.stop) await driver.stop(agent.agent_id);
      await sleep(s.repairStopWaitMs, signal);
      // the owner may have stopped it meanwhile: a repair never starts an agent that is not meant to run
      const relaunched = await deps.agents.relaunchIfRunning(agent.agent_id, () => driver.restart(agent.agent_id));
      if (!relaunched) return stoppedMeanwhile;
      try {
        await relaunched.done;
      } catch (err) {
        if (!(err instanceof AgentNotDeployedError) || !deps.redeploy) throw err;
        if ((await deps.redeploy(agent, signal)).skipped) return stoppedMeanwhile;
      }
      // verify: /healthz every interval until the verify timeout; a process that died again fails at once
      const deadline = Date.now() + s.repairVerifyTimeoutMs;
      const intervalMs = Math.min(2_000, Math.max(50, s.repairVerifyTimeoutMs / 20));
      let st = await driver.status(agent.agent_id);
      for (;;) {
        const url = st.url ?? agent.gateway_url ?? undefined;
        if (st.status === 'healthy' || (url && (await probeHealthz(url, Math.max(1, Math.min(s.probeTimeoutMs, deadline - Date.now())))))) {
          return { ok: true, detail: 'the gateway answers /healthz again', crashed: false, url };
        }
        if (CRASHED.has(st.status)) return { ok: false, crashed: true, detail: `${describeContainer(st.status)} after the restart` };
        if (Date.now() >= deadline || signal?.aborted) {
          return {
            ok: false,
            crashed: false,
            detail: `not healthy ${Math.round(s.repairVerifyTimeoutMs / 1000)} s after the restart: ${describeContainer(st.status)}`,
          };
        }
        await sleep(Math.min(intervalMs, deadline - Date.now()), signal);
        st = await driver.status(agent.agent_id);
      }
    } catch (err) {
      return { ok: false, crashed: false, detail: `repair failed: ${(err as Error).message}` };
    }
  }

  /**
   * Checks one agent this process holds and writes the outcome. Returns the state it left the
   * agent in, or null when the lease was lost on the way (nothing written then).
   */
  async function check(holder: string, agent: DueAgent, signal?: AbortSignal): Promise<WatchdogState | null> {
    const p = await probe(agent);
    let state = agent.state;
    let failures = agent.failures;
    let attempts = agent.repair_attempts;
    let changed = false;
    const events: NewEvent[] = [];
    const move = (to: WatchdogState, detail: string, notify = false) => {
      events.push({ kind: 'transition', from: state, to, detail, notify });
      state = to;
      changed = true;
    };
    const write = async (patch: Omit<CheckPatch, 'state' | 'failures' | 'repairAttempts' | 'stateChanged'>) =>
      (await apply(holder, agent, { state, failures, repairAttempts: attempts, stateChanged: changed, ...patch }, events.splice(0)))
        ? state
        : null;
    /** records a crash and moves to crash_loop when the window holds `threshold` of them (§3 "any"). */
    const crash = async (detail: string) => {
      events.push({ kind: 'crash', detail });
      const pending = events.filter((e) => e.kind === 'crash').length;
      const recent = (await watchdogRepo.crashesSince(db.kysely, agent.agent_id, s.crashLoopWindowMs)) + pending;
      if (recent >= s.crashLoopThreshold && state !== 'crash_loop') {
        move('crash_loop', `${recent} crashes within ${Math.round(s.crashLoopWindowMs / 1000)} s`, true);
      }
    };

    if (p.healthy) {
      await refreshUrl(agent.agent_id, p.url, agent.gateway_url);
      if (state !== 'running') move('running', state === 'starting' ? 'first successful health probe' : 'healthy again');
      failures = 0;
      attempts = 0;
      return write({ nextCheckInMs: s.checkIntervalMs, healthy: true, error: null });
    }
    if (p.unknown) return write({ nextCheckInMs: s.degradedIntervalMs, error: p.detail });

    // unhealthy: a dead process seen while it was believed up is a crash
    if (p.crashed && (state === 'starting' || state === 'running')) await crash(p.detail);
    if (state === 'crash_loop') return write({ nextCheckInMs: s.checkIntervalMs, error: p.detail }); // no restarts in a crash loop
    if (state === 'starting') {
      failures += 1;
      if (failures >= s.startupFailureThreshold) move('degraded', `no healthy probe after ${failures} tries: ${p.detail}`, true);
      return write({ nextCheckInMs: s.degradedIntervalMs, error: p.detail });
    }
    if (state === 'running') {
      failures = 1;
      move('degraded', p.detail, true);
      return write({ nextCheckInMs: s.degradedIntervalMs, error: p.detail });
    }
    // degraded (still unhealthy at its re-check) or repairing (after a failed attempt, or taken over mid-repair)
    failures += 1;
    if (!s.autoRepair) return write({ nextCheckInMs: s.degradedIntervalMs, error: p.detail });
    const attempt = attempts + 1;
    if (attempt > s.maxRepairAttempts) {
      move('crash_loop', `${s.maxRepairAttempts} repair attempts without success`, true);
      return write({ nextCheckInMs: s.checkIntervalMs, error: p.detail });
    }
    if (state !== 'repairing') move('repairing', `repair attempt ${attempt} of ${s.maxRepairAttempts}`);
    attempts = attempt;
    // recorded before acting: a backend that takes the agent over mid-repair counts this attempt
    const budget = s.repairStopWaitMs + s.repairVerifyTimeoutMs + 2 * s.probeTimeoutMs + 60_000;
    if ((await write({ nextCheckInMs: budget, error: p.detail })) === null) return null;
    changed = false;

    const r = await runRepair(agent, signal);
    // this process is shutting down: the repair was cut short, not failed; the next holder goes on
    if (signal?.aborted) return null;
    // its owner stopped it: not a failed attempt; the next sync takes it off the watch (`stopped`)
    if (r.skipped) return write({ nextCheckInMs: s.degradedIntervalMs, error: r.detail });
    events.push({ kind: 'repair', attempt, ok: r.ok, detail: r.detail, notify: true });
    if (r.ok) {
      await refreshUrl(agent.agent_id, r.url, agent.gateway_url);
      move('running', `repaired on attempt ${attempt}`);
      failures = 0;
      attempts = 0;
      return write({ nextCheckInMs: s.checkIntervalMs, healthy: true, error: null });
    }
    if (r.crashed) await crash(`the gateway did not stay up after repair attempt ${attempt}`);
    // (crash() may have moved it to crash_loop already: one crash-loop transition, one notification)
    const now = state as WatchdogState;
    if (now !== 'crash_loop' && attempt >= s.maxRepairAttempts) move('crash_loop', `${attempt} repair attempts without success`, true);
    return write({ nextCheckInMs: (state as WatchdogState) === 'crash_loop' ? s.checkIntervalMs : s.degradedIntervalMs, error: r.detail });
  }

  // when each agent was last asked to be checked soon (checkSoon's rate limit, per process)
  const soonAsked = new Map<string, number>();

  return {
    settings: s,
    check,

    /**
     * Checks the agent at the watchdog's next poll rather than at its next interval (docs/watchdog.md
     * "Checks on demand"): its process exited (`exit`, always), or a call to it failed
     * (`unreachable`, at most once per CHECK_SOON_GAP_MS per agent in this process, however many
     * calls fail). Only an agent believed up is moved; whichever backend holds it checks it.
     */
    async checkSoon(agentId: string, reason: 'exit' | 'unreachable'): Promise<boolean> {
      const now = Date.now();
      if (reason === 'unreachable') {
        if (now - (soonAsked.get(agentId) ?? 0) < CHECK_SOON_GAP_MS) return false;
        if (soonAsked.size >= 10_000) for (const [id, at] of soonAsked) if (now - at >= CHECK_SOON_GAP_MS) soonAsked.delete(id);
        soonAsked.set(agentId, now);
      }
      const moved = await watchdogRepo.checkNow(db.kysely, agentId);
      if (moved) deps.wake?.();
      return moved;
    },
    /** which agents this backend watches (the worker's adopt, due, renew, release: watchdog-work.service.ts) */
    leases: work.leases,
    /** the §6 notification outbox the worker sends */
    outbox: work.outbox,

    /** The owner's view: current state and the newest `limit` history rows (404 for another user's agent). */
    async view(userId: string, agentId: string, limit: number) {
      await deps.agents.findOwn(userId, agentId);
      return db.withUser(userId, async (trx) => {
        const cur = await watchdogRepo.current(trx, agentId);
        const history = await watchdogRepo.history(trx, agentId, limit);
        return {
          agentId,
          state: cur?.state ?? null,
          since: cur ? cur.state_changed_at.toISOString() : null,
          lastCheckAt: cur?.last_check_at ? new Date(cur.last_check_at).toISOString() : null,
          lastHealthyAt: cur?.last_healthy_at ? new Date(cur.last_healthy_at).toISOString() : null,
          nextCheckAt: cur ? cur.next_check_at.toISOString() : null,
          repairAttempts: cur?.repair_attempts ?? 0,
          lastError: cur?.last_error ?? null,
          history: history.map((h) => ({
            id: Number(h.id),
            kind: h.kind,
            from: h.from_state,
            to: h.to_state,
            attempt: h.attempt,
            ok: h.ok,
            detail: h.detail,
            at: h.created_at.toISOString(),
          })),
        };
      });
    },

    /**
     * §3 "Container health status" of the user's agent, asked of the hosting driver now: the
     * driver's value (stopped, suspended, not_found, error), or for a running unit `healthy` when
     * /healthz answers and `starting` when it stays silent after all retries.
     */
    async containerHealth(userId: string, agentId: string) {
      await deps.agents.findOwn(userId, agentId);
      const unavailable = () => new AppError('HOSTING_UNAVAILABLE', 'Hosting unavailable');
      if (deps.hostingAvailable && !deps.hostingAvailable()) throw unavailable();
      try {
        const r = await containerHealth(driver, agentId, {
          retries: deps.containerHealth?.retries ?? 3,
          intervalMs: deps.containerHealth?.intervalMs ?? 2_000,
          probeTimeoutMs: s.probeTimeoutMs,
        });
        return { agentId, status: r.status, url: r.url ?? null, checkedAt: new Date().toISOString() };
      } catch (err) {
        if (err instanceof HostingUnavailableError) throw unavailable();
        throw err;
      }
    },

    /** Current state only, for the agent's own API responses (null when it is not watched yet). */
    async stateOf(userId: string, agentId: string): Promise<{ state: WatchdogState; since: string } | null> {
      const cur = await db.withUser(userId, (trx) => watchdogRepo.current(trx, agentId));
      return cur ? { state: cur.state, since: cur.state_changed_at.toISOString() } : null;
    },
  };
}

export type WatchdogService = ReturnType<typeof createWatchdogService>;
