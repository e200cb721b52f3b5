/**
 * Idle agents sleep, traffic wakes them (docs/agents.md "Idle agents sleep"): with
 * AGENT_IDLE_SUSPEND_S set, the traffic counter (written every few seconds), the waker, and the
 * agent client's targets that wake a suspended agent before answering; unset, the targets alone and
 * nothing is counted. The sweep that suspends runs with the backend's workers (src/platform/workers.ts).
 */
import type { Config } from '../config/env.ts';
import {
  type AgentsDeps,
  createAgentTargets,
  createAgentTraffic,
  createIdleAgents,
  type IdleAgents,
  noTraffic,
} from '../domains/agents/index.ts';
import type { Logger } from '../lib/logger.ts';

/** Between 200 ms and 5 s: a quarter of the idle time, so a sleeping decision never rests on traffic older than that. */
const quarterOf = (idleS: number) => Math.min(5_000, Math.max(200, Math.floor((idleS * 1000) / 4)));

export function createIdleAgentsWiring(
  o: Pick<AgentsDeps, 'db' | 'driver' | 'locks' | 'secrets' | 'onEnqueue'> & { config: Pick<Config, 'AGENT_IDLE_SUSPEND_S'> },
  log: Logger,
) {
  const { db, driver, locks } = o;
  const idleS = o.config.AGENT_IDLE_SUSPEND_S;
  const traffic = idleS ? createAgentTraffic({ db, flushMs: quarterOf(idleS), log }) : undefined;
  // a suspended agent's cached target goes, so the next call in this process wakes it rather than finding no process
  const onSuspended = (a: { id: string; user_id: string }) => targets.forget(a.user_id, a.id);
  const idle: IdleAgents | undefined =
    idleS && traffic
      ? createIdleAgents({ db, driver, locks, idleS, traffic, log, onSuspended, onEnqueue: () => o.onEnqueue?.() })
      : undefined;
  const secretsKey = o.secrets.secretsEncryptionKey;
  const targets = createAgentTargets({ db, secretsKey, ...(idle && traffic ? { traffic, wake: idle.wake } : {}) });
  return {
    targets,
    /** what the agent client counts busy agents with (records nothing when agents never sleep) */
    traffic: traffic ?? noTraffic,
    idle,
    /** how often the backend's sweep looks for idle agents */
    sweepPollMs: idleS ? Math.min(30_000, quarterOf(idleS)) : 0,
    /** writes the traffic still counted (the platform's close) */
    close: async () => traffic?.close(),
  };
}
