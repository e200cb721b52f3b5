/**
 * Spend alerts that fire (docs/payments.md "Spend alerts") on the job runner (./job-runner.ts):
 * every `pollMs` a backend claims the armed alerts whose balance or month's spend has crossed the
 * threshold (FOR UPDATE SKIP LOCKED, leased), tells each by email and webhook, and records it
 * fired; a delivery that fails is retried with a backoff.
 */
import type { DueAlert, SpendAlerts } from '../domains/spend-alerts/index.ts';
import type { Logger } from '../lib/logger.ts';
import type { JobMetrics } from '../lib/metrics.ts';
import { createJobRunner, type JobKind } from './job-runner.ts';

export type SpendAlertsWorkerOptions = {
  alerts: Pick<SpendAlerts, 'claimDue' | 'deliver' | 'finish'>;
  logger?: Logger | undefined;
  metrics?: JobMetrics['observer'] | undefined;
  /** how often crossed alerts are looked for */
  pollMs: number;
};

export function spendAlertsJob(options: SpendAlertsWorkerOptions): JobKind<DueAlert, void> {
  return {
    name: 'spend-alert',
    pollMs: options.pollMs,
    leaseMs: 60_000,
    concurrency: 8,
    claim: (c) => options.alerts.claimDue(c.holder, c.leaseMs, c.limit),
    run: (a, signal) => options.alerts.deliver(a, signal),
    async finish(a, outcome, holder) {
      const recorded = await options.alerts.finish(a, outcome, holder);
      if (recorded && outcome.status === 'succeeded') options.logger?.info({ alert: a.kind, agentId: a.agent_id }, 'spend alert told');
      return recorded;
    },
    attempt: (a) => a.attempts,
    retry: { baseMs: 30_000, maxMs: 30 * 60_000, maxAttempts: 8 },
    describe: (a) => ({ alert: a.kind, agentId: a.agent_id }),
  };
}

export function createSpendAlertsWorker(options: SpendAlertsWorkerOptions) {
  return createJobRunner(spendAlertsJob(options), { logger: options.logger, metrics: options.metrics });
}
