/**
 * The backend's workers (docs/architecture.md "Workers"), in the order `startWorkers()` starts
 * them: the deployment jobs (after the start-up reconciliation), the watchdog's probe loop (unless
 * the tests drive it), heartbeats, Underground bus deliveries, spend alerts and the idle sweep. Each queue is a job kind on the
 * one job runner; they are given domain services only.
 */
import type { Config } from '../config/env.ts';
import type { AgentClient, DeploymentJobs, IdleAgents } from '../domains/agents/index.ts';
import type { HeartbeatService } from '../domains/heartbeat/index.ts';
import type { SpendAlerts } from '../domains/spend-alerts/index.ts';
import type { BusService } from '../domains/underground/index.ts';
import type { NotificationChannel, WatchdogService } from '../domains/watchdog/index.ts';
import type { Logger } from '../lib/logger.ts';
import type { JobMetrics } from '../lib/metrics.ts';
import type { PlatformDeps } from '../platform.ts';
import { createDeploymentWorker } from '../workers/deployments.ts';
import { createHeartbeatWorker } from '../workers/heartbeats.ts';
import { createIdleSweepWorker } from '../workers/idle-agents.ts';
import { createWorkerCatalog } from '../workers/job-runner.ts';
import { createSpendAlertsWorker } from '../workers/spend-alerts.ts';
import { createUndergroundBusWorker } from '../workers/underground-bus.ts';
import { createWatchdogWorker } from '../workers/watchdog.ts';

export function createBackendWorkers(o: {
  deps: Pick<PlatformDeps, 'workerPollMs' | 'watchdogEnabled' | 'undergroundBus'>;
  config: Pick<Config, 'HEARTBEAT_POLL_MS' | 'HEARTBEAT_TIMEOUT_MS' | 'SPEND_ALERTS_POLL_MS'>;
  log: Logger;
  metrics: JobMetrics | undefined;
  deployments: DeploymentJobs;
  watchdog: WatchdogService;
  watchdogChannels: NotificationChannel[];
  heartbeat: HeartbeatService;
  agentClient: AgentClient;
  bus: BusService;
  spendAlerts: SpendAlerts;
  /** idle agents (AGENT_IDLE_SUSPEND_S set): the sweep that suspends them */
  idleAgents: { idle: IdleAgents | undefined; sweepPollMs: number };
}) {
  const idle = o.idleAgents.idle;
  const observed = { logger: o.log, metrics: o.metrics?.observer };
  return createWorkerCatalog({
    deployments: createDeploymentWorker({ deployments: o.deployments, ...observed, pollMs: o.deps.workerPollMs }),
    ...(o.deps.watchdogEnabled !== false
      ? { watchdog: createWatchdogWorker({ watchdog: o.watchdog, channels: o.watchdogChannels, ...observed }) }
      : {}),
    // §4.12 heartbeats that fire: a schedule in PostgreSQL claimed by the backends
    heartbeats: createHeartbeatWorker({
      heartbeat: o.heartbeat,
      agentClient: o.agentClient,
      ...observed,
      pollMs: o.config.HEARTBEAT_POLL_MS,
      timeoutMs: o.config.HEARTBEAT_TIMEOUT_MS,
    }),
    undergroundBus: createUndergroundBusWorker({
      bus: o.bus,
      ...observed,
      pollMs: o.deps.undergroundBus?.pollMs,
      retryBaseMs: o.deps.undergroundBus?.retryBaseMs,
    }),
    // spend alerts whose threshold was crossed (docs/payments.md "Spend alerts")
    spendAlerts: createSpendAlertsWorker({ alerts: o.spendAlerts, ...observed, pollMs: o.config.SPEND_ALERTS_POLL_MS }),
    // agents without traffic for AGENT_IDLE_SUSPEND_S are suspended (docs/agents.md "Idle agents sleep")
    ...(idle ? { idleSweep: createIdleSweepWorker({ idle, ...observed, pollMs: o.idleAgents.sweepPollMs }) } : {}),
  });
}
