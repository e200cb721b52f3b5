/**
 * Idle agents sleep (docs/agents.md "Idle agents sleep"; §3 status `suspended`): with
 * AGENT_IDLE_SUSPEND_S set, a running agent without traffic for that long is suspended through the
 * hosting driver's suspend() (the local driver ends its whole process tree, keeping its folder; the
 * container drivers pause or scale to 0), and any traffic wakes it: the agent client's targets
 * (targets.service.ts) call `wake` when they resolve a `suspended` agent, and the caller's request
 * waits for it and is answered.
 *
 * - The sweep is a job kind on the job runner (src/workers/idle-agents.ts): `claim` writes the
 *   traffic counted in memory (agent-traffic.service.ts), then marks idle agents `suspended` in one
 *   statement (FOR UPDATE SKIP LOCKED); `suspend` makes it true through the driver, or puts the
 *   agent back to `running` when traffic came meanwhile; a driver failure does the same (`failed`).
 *   The record moves before the driver acts, so the watchdog, which watches `running` agents only,
 *   never takes a sleeping agent for a broken one.
 * - `wake` is one per agent in this process: concurrent callers share it. Under the agent's
 *   lifecycle lock it resumes the unit (a Stop or Start meanwhile wins: only a `suspended` agent is
 *   woken), waits until its gateway answers /healthz, then marks it `running`. A unit the driver
 *   has nothing to resume from (the local driver after a platform restart) is deployed again by a
 *   deployment job, as Start does, and the wake waits until it runs.
 */
import type { Db } from '../../../db/client.ts';
import { AppError } from '../../../lib/errors.ts';
import type { Logger } from '../../../lib/logger.ts';
import { probeHealthz } from '../agent-client/health-probe.client.ts';
import type { AgentRow } from '../agents.repo.ts';
import { AgentNotDeployedError, type HostingDriver } from '../drivers/driver.contract.ts';
import type { LifecycleLocks } from '../lifecycle-locks.service.ts';
import type { AgentTraffic } from './agent-traffic.service.ts';
import { idleAgentsRepo } from './idle-agents.repo.ts';

export type IdleAgentsDeps = {
  db: Db;
  driver: HostingDriver;
  locks: LifecycleLocks;
  /** AGENT_IDLE_SUSPEND_S */
  idleS: number;
  traffic: AgentTraffic;
  /** told once an agent is suspended: the targets drop its cached address, so the next call wakes it */
  onSuspended?: (agent: AgentRow) => void;
  /** a deployment job was queued in this process (the worker looks at once) */
  onEnqueue?: () => void;
  /** how long a wake may take until the gateway answers (default 60 s: OpenClaw takes ~10 s to start) */
  wakeTimeoutMs?: number;
  log?: Logger | undefined;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function createIdleAgents(deps: IdleAgentsDeps) {
  const { db, driver, locks, traffic } = deps;
  const idleMs = deps.idleS * 1000;
  const wakeTimeoutMs = deps.wakeTimeoutMs ?? 60_000;
  const waking = new Map<string, Promise<AgentRow>>();

  /** Polls /healthz where the driver says the gateway is, until it answers or the wake's time is up. */
  async function untilAnswering(agentId: string, known: string | null, deadline: number): Promise<string | undefined> {
    for (let wait = 10; ; wait = Math.min(wait * 2, 250)) {
      const st = await driver.status(agentId);
      const url = st.url ?? known ?? undefined;
      if (st.status === 'healthy' || (url && (await probeHealthz(url, Math.max(1, Math.min(2_000, deadline - Date.now())))))) return url;
      if (Date.now() >= deadline)
        throw new AppError('AGENT_TIMEOUT', `The agent was asleep and did not wake within ${Math.round(wakeTimeoutMs / 1000)} seconds`);
      await sleep(wait);
    }
  }

  /** Deploys the sleeping `agent` again (a deployment job) and waits until it runs. */
  async function redeployed(agent: AgentRow, deadline: number): Promise<AgentRow> {
    if (await idleAgentsRepo.redeploy(db.kysely, agent)) deps.onEnqueue?.();
    for (;;) {
      const now = await idleAgentsRepo.find(db.kysely, agent.id);
      if (now?.status === 'running') {
        traffic.touch(agent.id);
        return now;
      }
      if (!now || (now.status !== 'provisioning' && now.status !== 'suspended')) return now ?? agent; // stopped, failed: its record says so
      if (Date.now() >= deadline) throw new AppError('AGENT_TIMEOUT', 'The agent was asleep and is still starting; try again shortly');
      await sleep(50);
    }
  }

  async function wakeNow(agentId: string): Promise<AgentRow> {
    const started = Date.now();
    const resuming = await locks.run(agentId, async () => {
      const agent = await idleAgentsRepo.find(db.kysely, agentId);
      // woken by someone else, stopped or deleted meanwhile: the caller gets what the record says
      if (agent?.status !== 'suspended') return { agent };
      const done = driver.resume(agentId);
      done.catch(() => {}); // awaited below, once the lock is let go
      return { agent, done };
    });
    if (!resuming.done) {
      if (!resuming.agent) throw new AppError('AGENT_UNAVAILABLE', 'The agent is gone');
      return resuming.agent;
    }
    try {
      await resuming.done;
    } catch (err) {
      // nothing to resume (the local driver after a platform restart): deployed again, as Start would
      if (err instanceof AgentNotDeployedError) return redeployed(resuming.agent, started + wakeTimeoutMs);
      deps.log?.warn({ agentId, err }, 'a sleeping agent could not be woken');
      throw new AppError('AGENT_UNAVAILABLE', 'The agent was asleep and could not be woken; try again, or restart it');
    }
    const url = await untilAnswering(agentId, resuming.agent.gateway_url, started + wakeTimeoutMs);
    const woken = await idleAgentsRepo.woken(db.kysely, agentId, url);
    traffic.touch(agentId);
    deps.log?.info({ agentId, ms: Date.now() - started }, 'agent woken');
    // a Stop that came meanwhile moved it on: its record says so
    return woken ?? (await idleAgentsRepo.find(db.kysely, agentId)) ?? resuming.agent;
  }

  return {
    idleMs,

    /** Wakes the suspended `agent` and resolves with its record once its gateway answers; one wake per agent at a time. */
    wake(agent: AgentRow): Promise<AgentRow> {
      let w = waking.get(agent.id);
      if (!w) {
        w = wakeNow(agent.id).finally(() => waking.delete(agent.id));
        waking.set(agent.id, w);
      }
      return w;
    },

    /** The sweep's claim: traffic written first, then up to `limit` idle running agents marked `suspended`. */
    async claim(limit: number): Promise<AgentRow[]> {
      await traffic.flush();
      return idleAgentsRepo.claimIdle(db.kysely, deps.idleS, limit);
    },

    /**
     * Suspends one claimed agent through the driver, unless it had traffic here since the claim
     * read it (then it is `running` again) or its record moved on (woken, stopped, deleted).
     */
    async suspend(agent: AgentRow): Promise<void> {
      const suspending = await locks.run(agent.id, async () => {
        if (traffic.activeSince(agent.id, Date.now() - idleMs)) {
          await idleAgentsRepo.unsuspend(db.kysely, agent.id);
          return undefined;
        }
        if ((await idleAgentsRepo.find(db.kysely, agent.id))?.status !== 'suspended') return undefined;
        deps.onSuspended?.(agent);
        const done = driver.suspend(agent.id);
        done.catch(() => {});
        return { done };
      });
      if (!suspending) return;
      await suspending.done.catch((err: unknown) => {
        // no unit to suspend (its state is gone): nothing runs, which is what suspended means
        if (!(err instanceof AgentNotDeployedError)) throw err;
      });
      deps.log?.info({ agentId: agent.id }, 'idle agent suspended');
    },

    /** A suspend that failed: the agent is `running` again (its process may well still be there). */
    failed: (agent: AgentRow) => idleAgentsRepo.unsuspend(db.kysely, agent.id),
  };
}

export type IdleAgents = ReturnType<typeof createIdleAgents>;
