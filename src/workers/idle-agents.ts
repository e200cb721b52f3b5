/**
 * The idle sweep (docs/agents.md "Idle agents sleep") on the job runner (./job-runner.ts): with
 * AGENT_IDLE_SUSPEND_S set, every `pollMs` a backend writes the traffic it counted, claims the
 * running agents without traffic for that long (marked `suspended` in the claiming statement, FOR
 * UPDATE SKIP LOCKED, so replicas never take the same agent) and suspends each through the hosting
 * driver. A suspend that fails (or is cut short by a stop) puts the agent back to `running`; the
 * next sweep tries again. Waking is not here: traffic wakes an agent where it arrives (the agent
 * client's targets).
 */
import type { AgentRow, IdleAgents } from '../domains/agents/index.ts';
import type { Logger } from '../lib/logger.ts';
import type { JobMetrics } from '../lib/metrics.ts';
import { createJobRunner, type JobKind } from './job-runner.ts';

export type IdleSweepOptions = {
  idle: Pick<IdleAgents, 'claim' | 'suspend' | 'failed'>;
  logger?: Logger | undefined;
  metrics?: JobMetrics['observer'] | undefined;
  /** how often idle agents are looked for */
  pollMs: number;
};

export function idleSweepJob(options: IdleSweepOptions): JobKind<AgentRow, void> {
  return {
    name: 'idle-sweep',
    pollMs: options.pollMs,
    concurrency: 8,
    claim: (c) => options.idle.claim(c.limit),
    run: (agent) => options.idle.suspend(agent),
    async finish(agent, outcome) {
      if (outcome.status !== 'succeeded') await options.idle.failed(agent);
      return true;
    },
    attempt: () => 1,
    describe: (agent) => ({ agentId: agent.id }),
  };
}

export function createIdleSweepWorker(options: IdleSweepOptions) {
  return createJobRunner(idleSweepJob(options), { logger: options.logger, metrics: options.metrics });
}
