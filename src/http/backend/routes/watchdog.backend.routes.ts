/**
 * GET /api/agents/:id/watchdog (backend, bearer key; designed: §3 "Watchdog lifecycle" gives the
 * states, not an endpoint): the agent's watchdog state and history. Acting user in `x-user-id`.
 */

import { z } from 'zod';
import { type WatchdogService, watchdogHistoryLimit, watchdogViewSchema } from '../../../domains/watchdog/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders, errorResponses } from '../../shared/schemas.ts';
import { actingUser } from '../acting-user.ts';

export const backendWatchdogRoutes = (deps: { watchdog: WatchdogService }): RouteModule<'bearer'> => {
  return {
    prefix: '/api/agents',
    bearer: async (app) => {
      app.get('/:id/health', {
        schema: {
          tags: ['agents'],
          summary: "An agent's container health (§3)",
          description:
            "Acting user: header `x-user-id` (without it, the operator account). Asks the hosting driver now and probes the agent's /healthz (§4.12 timeout): " +
            '`healthy` (running and /healthz answers), `starting` (running, /healthz silent after all retries: CONTAINER_HEALTH_RETRIES, CONTAINER_HEALTH_INTERVAL_MS apart), ' +
            '`running`, `stopped`, `suspended` (marked idle), `not_found` (no unit on the hosting platform), `error` (crashed, unexpected state or build failed). ' +
            "404 for another user's agent; 500 `Hosting unavailable` when the hosting platform cannot be asked.",
          headers: documentedHeaders({ 'x-user-id': 'Acting user (user id, UUID_PATTERN)' }),
          params: z.object({ id: z.string().min(1).max(200) }),
          response: {
            200: z.object({
              agentId: z.string(),
              status: z.enum(['healthy', 'starting', 'running', 'stopped', 'suspended', 'not_found', 'error']),
              url: z.string().nullable().describe('where the gateway answers, as the driver reports it'),
              checkedAt: z.string(),
            }),
            ...errorResponses(400, 401, 403, 404, 500),
          },
        },
        handler: async (request) => deps.watchdog.containerHealth(actingUser(request), request.params.id),
      });

      app.get('/:id/watchdog', {
        schema: {
          tags: ['agents'],
          summary: "An agent's watchdog state and history",
          description:
            'Acting user: header `x-user-id` (without it, the operator account). The state (§3: starting, running, degraded, repairing, crash_loop, stopped) and the newest `limit` (default 50, max 100) ' +
            "history rows: transitions, crashes and repair attempts with their outcome. `state` is null while the agent has never been watched (not running yet). 404 for another user's agent.",
          headers: documentedHeaders({ 'x-user-id': 'Acting user (user id, UUID_PATTERN)' }),
          params: z.object({ id: z.string().min(1).max(200) }),
          querystring: z.object({ limit: watchdogHistoryLimit }),
          response: { 200: watchdogViewSchema, ...errorResponses(400, 401, 403, 404, 500) },
        },
        handler: async (request) => {
          return deps.watchdog.view(actingUser(request), request.params.id, request.query.limit);
        },
      });
    },
  };
};
