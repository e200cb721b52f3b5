/**
 * GET /metrics on both apps (docs/metrics.md): Prometheus text for whoever holds METRICS_TOKEN.
 * Without METRICS_TOKEN none of this exists: no registry, no route (404 like any unknown path) and
 * no per-request hook, so an app without metrics pays nothing for them.
 *
 * Each app instance has its own registry (never prom-client's global one): `npm start` runs both
 * apps in one process and tests build many apps, and a metric name may be registered once per
 * registry. Every sample carries `app="web"` or `app="backend"`.
 */

import { createRequire } from 'node:module';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type * as PromClient from 'prom-client';
import type { Registry } from 'prom-client';

/** prom-client is required when metrics are first made (METRICS_TOKEN set), not at start: ~20 MB resident otherwise held for nothing */
const prom = (): typeof PromClient => createRequire(import.meta.url)('prom-client');

import { z } from 'zod';
import { secretMatcher } from '../../lib/crypto.ts';
import { unauthorized } from '../../lib/errors.ts';
import type { App } from './base-app.ts';
import { documented } from './openapi.ts';

/** the label of requests no route matched (404s, and 405s of a known path): never the raw path, which is unbounded */
export const UNMATCHED_ROUTE = 'unmatched';

export const METRICS_SECURITY = [{ metricsToken: [] }];
export const METRICS_SECURITY_SCHEME = {
  metricsToken: { type: 'http', scheme: 'bearer', description: 'METRICS_TOKEN (GET /metrics, docs/metrics.md)' },
};

export type AppMetrics = {
  registry: Registry;
  /** the scope hook of GET /metrics: the bearer token, compared in constant time */
  auth: (request: FastifyRequest) => Promise<void>;
  /** installs the request duration histogram's hook on `app` (before any route is added) */
  instrument(app: App): void;
};

type Child = { observe(value: number): void };

export function createAppMetrics(name: 'web' | 'backend', token: string): AppMetrics {
  const registry = new (prom().Registry)();
  registry.setDefaultLabels({ app: name });
  prom().collectDefaultMetrics({ register: registry });
  const duration = new (prom().Histogram)({
    name: 'http_request_duration_seconds',
    help: 'Time from the start of routing to the end of the response, by route pattern',
    labelNames: ['method', 'route', 'status_code'] as const,
    registers: [registry],
  });
  // a child per label set, found by one string key, saves building a labels object per request
  // (prom-client still validates and hashes the child's labels on observe: docs/metrics.md "Cost")
  const children = new Map<string, Child>();
  const matches = secretMatcher(token);

  // a callback hook, not an async one: it runs on every response (see base-app.ts's onSend)
  function onResponse(request: FastifyRequest, reply: FastifyReply, done: () => void) {
    const route = request.routeOptions.url ?? UNMATCHED_ROUTE;
    const status = reply.statusCode;
    const key = `${request.method} ${status} ${route}`;
    let child = children.get(key);
    if (child === undefined) {
      child = duration.labels(request.method, route, String(status));
      children.set(key, child);
    }
    child.observe(reply.elapsedTime / 1000);
    done();
  }

  return {
    registry,
    auth: documented(
      async function requireMetricsToken(request: FastifyRequest): Promise<void> {
        const header = request.headers.authorization;
        if (typeof header !== 'string' || !header.startsWith('Bearer ') || !matches(header.slice('Bearer '.length).trim())) {
          throw unauthorized('Unauthorized');
        }
      },
      { security: METRICS_SECURITY, responses: { 401: '`Unauthorized`: no `Authorization: Bearer <METRICS_TOKEN>`' } },
    ),
    instrument(app) {
      app.addHook('onResponse', onResponse);
    },
  };
}

/**
 * Declares GET /metrics on `app`, a plugin of the `metrics` scope (whose hook is `AppMetrics.auth`).
 * Each app's route module (routes/metrics.web.routes.ts, routes/metrics.backend.routes.ts) calls it, so the route map names that module.
 */
export function declareMetricsRoute(app: App, metrics: AppMetrics): void {
  app.get('/metrics', {
    schema: {
      tags: ['operations'],
      summary: 'Prometheus metrics',
      description:
        'The Prometheus text exposition format (added; docs/metrics.md): request durations by route pattern, process metrics and, ' +
        'on the backend, agents by status, the deployment queue, AI provider latency and fallbacks, and database pool usage. ' +
        'Exists only when METRICS_TOKEN is set; answers only `Authorization: Bearer <METRICS_TOKEN>`.',
      response: { 200: z.string().describe('text/plain; version=0.0.4 (Prometheus exposition format)') },
    },
    handler: async (_request, reply) => {
      const body = await metrics.registry.metrics();
      return reply.type(metrics.registry.contentType).send(body);
    },
  });
}
