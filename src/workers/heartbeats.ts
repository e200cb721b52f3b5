/**
 * Heartbeats that fire (§4.12, §2 Heartbeat settings) on the job runner (./job-runner.ts): every
 * `pollMs` a backend claims the due, enabled heartbeats from PostgreSQL (FOR UPDATE SKIP LOCKED,
 * leased) and wakes each agent: a POST to its gateway's `/v1/heartbeat` with its own gateway token,
 * where the runtime runs its heartbeat prompt through its model. The schedule lives in the
 * settings row, not in timers, so a platform restart neither loses a due heartbeat (it is still
 * due, or its lease runs out and it is claimed again) nor doubles one: the run id is the agent and
 * the scheduled time, and the runtime answers a repeated run id from its memory instead of running
 * the prompt again. A heartbeat that fails is recorded as failed, not retried: the next one comes
 * at its frequency. docs/watchdog.md ("Heartbeats") describes it.
 */
import type { AgentClient } from '../domains/agents/index.ts';
import type { DueHeartbeat, HeartbeatRun, HeartbeatService } from '../domains/heartbeat/index.ts';
import type { Logger } from '../lib/logger.ts';
import type { JobMetrics } from '../lib/metrics.ts';
import { createJobRunner, type JobKind } from './job-runner.ts';

export type HeartbeatWorkerOptions = {
  heartbeat: Pick<HeartbeatService, 'claimDue' | 'finish'>;
  /** the one client of agents' gateways (it owns the address and the token) */
  agentClient: Pick<AgentClient, 'heartbeat'>;
  logger?: Logger | undefined;
  metrics?: JobMetrics['observer'] | undefined;
  /** how often due heartbeats are looked for (HEARTBEAT_POLL_MS) */
  pollMs: number;
  /** how long one agent may take to run its heartbeat (HEARTBEAT_TIMEOUT_MS) */
  timeoutMs: number;
  holderId?: string;
  /** heartbeats run at once */
  batch?: number;
  /** how long a claimed heartbeat stays this process's (default: the timeout plus 30 s, so a live holder never loses one it runs) */
  leaseMs?: number;
};

export function heartbeatJob(options: HeartbeatWorkerOptions): JobKind<DueHeartbeat, HeartbeatRun> {
  const log = options.logger;
  return {
    name: 'heartbeat',
    pollMs: options.pollMs,
    leaseMs: options.leaseMs ?? options.timeoutMs + 30_000,
    concurrency: options.batch ?? 20,
    claim: (c) => options.heartbeat.claimDue(c.holder, c.leaseMs, c.limit),
    /** Wakes one agent; the run to record (an agent that does not answer is a value, not a throw). */
    async run(h) {
      // a sleeping agent is woken by the call (docs/agents.md "Idle agents sleep")
      if ((h.agent_status !== 'running' && h.agent_status !== 'suspended') || !h.gateway_url) {
        return { status: 'skipped', error: h.agent_status === null ? 'no such agent' : `agent is ${h.agent_status}`, ran: false };
      }
      const runId = `${h.agent_id}:${h.next_heartbeat.toISOString()}`;
      const r = await options.agentClient.heartbeat(h.user_id, h.agent_id, runId, options.timeoutMs);
      return r.ok ? { status: 'ok', error: null, ran: true } : { status: 'failed', error: r.error, ran: false };
    },
    async finish(h, outcome, holder) {
      const recorded = await options.heartbeat.finish(holder, h, outcome);
      if (recorded && outcome.status === 'succeeded') {
        const run = outcome.result;
        if (run.status === 'ok') log?.info({ agentId: h.agent_id }, 'heartbeat ran');
        else log?.warn({ agentId: h.agent_id, status: run.status, error: run.error }, 'heartbeat did not run');
      }
      return recorded;
    },
    attempt: () => 1,
    describe: (h) => ({ agentId: h.agent_id }),
  };
}

export function createHeartbeatWorker(options: HeartbeatWorkerOptions) {
  return createJobRunner(heartbeatJob(options), { logger: options.logger, metrics: options.metrics, holder: options.holderId });
}
