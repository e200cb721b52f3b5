/** §4.12 web health: public summary, hardware detail for admins only. */

import { z } from 'zod';
import type { HealthService } from '../../../domains/health/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';

const healthValue = z.enum(['healthy', 'degraded', 'unhealthy']);

export const webHealthRoutes = (deps: { health: HealthService }): RouteModule<'public' | 'admin'> => {
  return {
    prefix: '/api',
    public: async (app) => {
      app.get('/health', {
        schema: {
          tags: ['health'],
          summary: 'Web app health',
          description:
            "healthy when CPU and memory are both at or below 70%; degraded up to 85%; unhealthy above. 500 only when collecting fails. The CPU and memory are the platform process's own (its event loop's utilisation; its memory against V8's heap limit and the cgroup's memory limit), not the machine's: other programs on a shared host do not make the platform unhealthy. Which check failed and why: GET /api/admin/health (§4.12: hardware fields are admin-only).",
          response: {
            200: z.object({ status: z.literal('ok'), health: healthValue, timestamp: z.string() }),
            500: z.object({ status: z.literal('error'), health: z.literal('unhealthy'), timestamp: z.string() }),
          },
        },
        handler: async (request, reply) => {
          try {
            const s = deps.health.summary();
            return { status: 'ok' as const, health: s.health, timestamp: s.timestamp };
          } catch (err) {
            request.log.error({ err }, 'health collection failed');
            return reply.code(500).send({ status: 'error' as const, health: 'unhealthy' as const, timestamp: new Date().toISOString() });
          }
        },
      });
    },
    // the admin scope answers 401 without a session and 403 ADMIN_REQUIRED for a user who is not an admin
    admin: async (app) => {
      app.get('/admin/health', {
        schema: {
          tags: ['health'],
          summary: 'Web app health with hardware detail (admins)',
          description:
            "An admin's session (docs/admin.md); 401 without a session, 403 `ADMIN_REQUIRED` otherwise. `health` is GET /api/health's, judged by `checks`: the platform process's CPU (event loop utilisation) and memory, each with its status and a sentence saying what it measured; `reason` names the failing ones. `cpu` and `memory` are the machine's, information only: a busy shared host does not make the platform unhealthy.",
          response: {
            200: z.object({
              status: z.literal('ok'),
              health: healthValue,
              reason: z.string().describe('which checks are not healthy and why; when healthy, says so'),
              checks: z.array(
                z.object({
                  name: z.enum(['cpu', 'memory']),
                  status: healthValue,
                  percent: z.number(),
                  reason: z.string(),
                }),
              ),
              timestamp: z.string(),
              cpu: z
                .object({ percent: z.number(), cores: z.number(), loadAverage: z.array(z.number()) })
                .describe("the machine's, as information (not a check)"),
              memory: z
                .object({ percent: z.number(), totalBytes: z.number(), freeBytes: z.number() })
                .describe("the machine's, as information (not a check)"),
              process: z.object({
                rssBytes: z.number(),
                heapUsedBytes: z.number(),
                heapLimitBytes: z.number(),
                uptimeSeconds: z.number(),
                node: z.string(),
              }),
              system: z.object({ platform: z.string(), arch: z.string(), uptimeSeconds: z.number() }),
            }),
            ...errorResponses(401, 403),
          },
        },
        handler: async () => ({ ...deps.health.detail(), status: 'ok' as const }),
      });
    },
  };
};
