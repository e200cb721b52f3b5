/** §4.12 web health: public summary, hardware detail for admins only. */

import { z } from 'zod';
import type { HealthService } from '../../../domains/health/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorSchema } from '../../shared/schemas.ts';

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
            'healthy when CPU and memory are both at or below 70%; degraded up to 85%; unhealthy above. 500 only when collecting fails.',
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
          description: 'Session of a user whose email is in ADMIN_EMAILS; 401 without a session, 403 `ADMIN_REQUIRED` otherwise.',
          response: {
            200: z.object({
              status: z.literal('ok'),
              health: healthValue,
              timestamp: z.string(),
              cpu: z.object({ percent: z.number(), cores: z.number(), loadAverage: z.array(z.number()) }),
              memory: z.object({ percent: z.number(), totalBytes: z.number(), freeBytes: z.number() }),
              process: z.object({ rssBytes: z.number(), heapUsedBytes: z.number(), uptimeSeconds: z.number(), node: z.string() }),
              system: z.object({ platform: z.string(), arch: z.string(), uptimeSeconds: z.number() }),
            }),
            401: errorSchema,
            403: errorSchema,
          },
        },
        handler: async () => ({ ...deps.health.detail(), status: 'ok' as const }),
      });
    },
  };
};
