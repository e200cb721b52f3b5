/**
 * Agent endpoints that are not (or no longer) served (§4.7 clone, §9 preflight): answered as the
 * specification says, without authentication, so a client learns so instead of a 404 of an
 * unknown path.
 */
import { z } from 'zod';
import { notFound } from '../../../lib/errors.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorSchema } from '../../shared/schemas.ts';

export const agentCloneRoutes = (): RouteModule<'public'> => ({
  prefix: '/api/agents',
  public: async (app) => {
    app.post('/clone', {
      schema: {
        tags: ['agents'],
        summary: 'Clone an agent (unavailable)',
        description: 'Always 501; the body is ignored and no payment is taken.',
        response: { 501: z.object({ error: z.string(), message: z.string(), status: z.literal('unavailable') }) },
      },
      handler: async (_request, reply) =>
        reply.code(501).send({
          error: 'Not implemented',
          message: 'Agent cloning is not available yet; no payment was taken.',
          status: 'unavailable' as const,
        }),
    });

    app.get('/clone', {
      schema: {
        tags: ['agents'],
        summary: 'Clone service information',
        description: 'No authentication. Cloning itself is unavailable (POST answers 501).',
        response: {
          200: z.object({ service: z.string(), version: z.string(), protocol: z.string(), clonePrice: z.string(), chainId: z.number() }),
        },
      },
      handler: async () => ({ service: 'agent-clone', version: '0.1.0', protocol: 'x402', clonePrice: '0', chainId: 8453 }),
    });

    app.get('/preflight', {
      schema: { tags: ['agents'], summary: 'Removed (§9)', description: 'Deprecated; always 404.', response: { 404: errorSchema } },
      handler: async () => {
        throw notFound();
      },
    });
  },
});
