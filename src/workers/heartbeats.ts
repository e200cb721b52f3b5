/**
 * Heartbeats that fire (§4.12, §2 Heartbeat settings): every `pollMs` a backend takes the due,
 * enabled heartbeats from PostgreSQL (FOR UPDATE SKIP LOCKED, leased) and wakes each agent: a
 * POST to its gateway's `/v1/heartbeat` with its own gateway token, where the runtime runs its
 * heartbeat prompt through its model. The schedule lives in the settings row, not in timers, so
 * a platform restart neither loses a due heartbeat (it is still due, or its lease runs out and it
 * is taken again) nor doubles one: the run id is the agent and the scheduled time, and the
 * runtime answers a repeated run id from its memory instead of running the prompt again.
 * docs/watchdog.md ("Heartbeats") describes it.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../db/client.ts';
import type { AgentClient } from '../domains/agents/index.ts';
import { type DueHeartbeat, heartbeatScheduleRepo, parseFrequency } from '../domains/heartbeat/index.ts';
import type { WorkerLogger } from './deployments.ts';

export type HeartbeatWorkerOptions = {
  db: Db;
  /** the one client of agents' gateways (it owns the address and the token) */
  agentClient: Pick<AgentClient, 'heartbeat'>;
  logger?: WorkerLogger;
  /** how often due heartbeats are looked for (HEARTBEAT_POLL_MS) */
  pollMs: number;
  /** how long one agent may take to run its heartbeat (HEARTBEAT_TIMEOUT_MS) */
  timeoutMs: number;
  holderId?: string;
  /** heartbeats run at once */
  batch?: number;
  /** how long a taken heartbeat stays this process's (default: the timeout plus 30 s, so a live holder never loses one it runs) */
  leaseMs?: number;
};

const silent: WorkerLogger = { info() {}, warn() {}, error() {} };

export function createHeartbeatWorker(options: HeartbeatWorkerOptions) {
  const { db } = options;
  const log = options.logger ?? silent;
  const holder = options.holderId ?? `heartbeats-${randomUUID()}`;
  const batch = options.batch ?? 20;
  const leaseMs = options.leaseMs ?? options.timeoutMs + 30_000;
  let running = false;
  let timer: NodeJS.Timeout | undefined;
  let current: Promise<unknown> | undefined;

  /** Wakes one agent; the outcome to record. */
  async function wake(h: DueHeartbeat): Promise<{ status: 'ok' | 'failed' | 'skipped'; error: string | null; ran: boolean }> {
    if (h.agent_status !== 'running' || !h.gateway_url) {
      return { status: 'skipped', error: h.agent_status === null ? 'no such agent' : `agent is ${h.agent_status}`, ran: false };
    }
    const runId = `${h.agent_id}:${h.next_heartbeat.toISOString()}`;
    const r = await options.agentClient.heartbeat(h.user_id, h.agent_id, runId, options.timeoutMs);
    return r.ok ? { status: 'ok', error: null, ran: true } : { status: 'failed', error: r.error, ran: false };
  }

  async function runOne(h: DueHeartbeat) {
    const frequencyMs = parseFrequency(h.frequency) ?? 3 * 60 * 60 * 1000;
    const outcome = await wake(h);
    const recorded = await heartbeatScheduleRepo.finish(db.kysely, holder, h, { ...outcome, frequencyMs });
    if (!recorded) log.warn({ agentId: h.agent_id }, 'heartbeat lease lost before its run was recorded');
    else if (outcome.status === 'ok') log.info({ agentId: h.agent_id }, 'heartbeat ran');
    else log.warn({ agentId: h.agent_id, status: outcome.status, error: outcome.error }, 'heartbeat did not run');
  }

  /** Takes the due heartbeats once and runs them; resolves when they are recorded. Returns how many. */
  async function pollOnce(): Promise<number> {
    const due = await heartbeatScheduleRepo.claimDue(db.kysely, holder, leaseMs, batch);
    await Promise.all(due.map((h) => runOne(h).catch((err) => log.error({ err, agentId: h.agent_id }, 'heartbeat failed'))));
    return due.length;
  }

  function schedule(delay: number) {
    if (!running) return;
    timer = setTimeout(() => {
      current = pollOnce()
        .catch((err) => log.error({ err }, 'heartbeat poll failed'))
        .then((n) => schedule(n === batch ? 0 : options.pollMs));
    }, delay);
    timer.unref();
  }

  return {
    holderId: holder,
    pollOnce,
    /** takes due heartbeats without running them (tests: a holder that dies before recording) */
    claim: () => heartbeatScheduleRepo.claimDue(db.kysely, holder, leaseMs, batch),
    /** wakes one agent without recording the run (tests: a holder that dies after the agent ran) */
    wake,
    async start() {
      if (running) return;
      running = true;
      schedule(0);
    },
    async stop() {
      running = false;
      clearTimeout(timer);
      await current;
    },
  };
}
