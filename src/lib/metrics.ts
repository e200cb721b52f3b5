/**
 * The backend's own metrics (docs/metrics.md), beside the HTTP ones of src/http/shared/metrics.ts:
 * agents by status and the deployment queue (read from PostgreSQL when scraped), database pool
 * usage, AI provider latency and fallbacks, and the runs of the job runner (observed as they happen).
 */

import { createRequire } from 'node:module';
import type pg from 'pg';
import type * as PromClient from 'prom-client';
import type { Registry } from 'prom-client';

/** prom-client is required when metrics are first made (METRICS_TOKEN set), not at start (src/http/shared/metrics.ts) */
const prom = (): typeof PromClient => createRequire(import.meta.url)('prom-client');

/** What the database says at scrape time (src/domains/agents/agents-metrics.service.ts reads it). */
export type PlatformCounts = {
  /** every agent status, 0 where no agent has it */
  agents: Record<string, number>;
  queuedJobs: number;
  /** age of the oldest queued deployment job in seconds, 0 when none is queued */
  oldestQueuedSeconds: number;
};

/**
 * AI provider attempts, observed by the AI layer's fallback loop. The metrics outlive any one app
 * (the AI service is built once per platform), so they are created unregistered and each backend
 * app's registry registers them.
 */
export type ProviderMetrics = {
  observer: {
    onProviderCall(provider: string, model: string, seconds: number, outcome: string): void;
    onFallback(): void;
  };
  registerIn(registry: Registry): void;
};

export function createProviderMetrics(): ProviderMetrics {
  const latency = new (prom().Histogram)({
    name: 'platform_ai_provider_request_duration_seconds',
    help: 'AI provider attempts: time until the provider answered (a stream: until it opened) or failed',
    labelNames: ['provider', 'outcome'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [],
  });
  const fallbacks = new (prom().Counter)({
    name: 'platform_ai_fallbacks_total',
    help: 'AI attempts that failed and were retried on the next model of the fallback chain',
    registers: [],
  });
  return {
    observer: {
      // the model is left out of the labels: the catalog can hold hundreds of router models
      onProviderCall: (provider, _model, seconds, outcome) => latency.observe({ provider, outcome }, seconds),
      onFallback: () => fallbacks.inc(),
    },
    registerIn(registry) {
      registry.registerMetric(latency);
      registry.registerMetric(fallbacks);
    },
  };
}

/** How a run of a job ended, as the job runner (src/workers/job-runner.ts) reports it. */
export type JobRunOutcome = 'succeeded' | 'retried' | 'failed' | 'released' | 'lost';

/**
 * Runs of the job runner (src/workers/job-runner.ts), by job kind and outcome. Like the provider
 * metrics, created unregistered: the app of the process that runs the jobs registers them (the
 * backend's jobs on the backend app, the web app's on the web app).
 */
export type JobMetrics = {
  observer: { onJobRun(job: string, outcome: JobRunOutcome, seconds: number): void };
  registerIn(registry: Registry): void;
};

export function createJobMetrics(): JobMetrics {
  const runs = new (prom().Histogram)({
    name: 'platform_job_run_duration_seconds',
    help: 'Runs of queued jobs (deployments, heartbeats, bus deliveries, security events, watchdog notifications): time from claim to recorded outcome',
    labelNames: ['job', 'outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 30, 60, 120, 300],
    registers: [],
  });
  return {
    observer: { onJobRun: (job, outcome, seconds) => runs.observe({ job, outcome }, seconds) },
    registerIn(registry) {
      registry.registerMetric(runs);
    },
  };
}

export type BackendMetricSources = {
  /** bounded in time by its implementation; a failure leaves the database gauges empty for that scrape */
  counts: () => Promise<PlatformCounts>;
  /** the connection pools by name (owner, request) */
  pools: Record<string, pg.Pool>;
  provider?: ProviderMetrics | undefined;
  /** the runs of the backend's jobs */
  jobs?: JobMetrics | undefined;
};

/** Registers the backend's gauges on an app's registry; all of them are computed when scraped. */
export function registerBackendMetrics(registry: Registry, sources: BackendMetricSources): void {
  // the database gauges and this counter are collected concurrently within one scrape: they share
  // one read, and each waits for it before reporting
  const failures = new (prom().Counter)({
    name: 'platform_metrics_collect_failures_total',
    help: 'Scrapes whose database counts failed or took too long (their gauges are left out)',
    registers: [registry],
    async collect() {
      await counts();
    },
  });
  let pending: Promise<PlatformCounts | undefined> | undefined;
  const counts = () =>
    (pending ??= sources
      .counts()
      .catch(() => {
        failures.inc();
        return undefined;
      })
      .finally(() => {
        pending = undefined;
      }));

  new (prom().Gauge)({
    name: 'platform_agents',
    help: 'Agents of every user by status',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const c = await counts();
      this.reset();
      if (c) for (const [status, n] of Object.entries(c.agents)) this.set({ status }, n);
    },
  });
  new (prom().Gauge)({
    name: 'platform_deployment_jobs_queued',
    help: 'Deployment jobs waiting in the queue (status queued, due or retrying later)',
    registers: [registry],
    async collect() {
      const c = await counts();
      this.reset();
      if (c) this.set(c.queuedJobs);
    },
  });
  new (prom().Gauge)({
    name: 'platform_deployment_jobs_oldest_queued_age_seconds',
    help: 'Age of the oldest queued deployment job, 0 when none is queued',
    registers: [registry],
    async collect() {
      const c = await counts();
      this.reset();
      if (c) this.set(c.oldestQueuedSeconds);
    },
  });

  const pools = Object.entries(sources.pools);
  const poolGauge = (name: string, help: string, read: (p: pg.Pool) => number) =>
    new (prom().Gauge)({
      name,
      help,
      labelNames: ['pool'] as const,
      registers: [registry],
      collect() {
        for (const [pool, p] of pools) this.set({ pool }, read(p));
      },
    });
  poolGauge('platform_db_pool_connections', 'Connections the pool holds (busy and idle)', (p) => p.totalCount);
  poolGauge('platform_db_pool_idle_connections', 'Connections of the pool not checked out', (p) => p.idleCount);
  poolGauge('platform_db_pool_waiting_clients', 'Queries waiting for a connection of the pool', (p) => p.waitingCount);

  sources.provider?.registerIn(registry);
  sources.jobs?.registerIn(registry);
}
