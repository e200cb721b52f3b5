/**
 * §6 / §4.12 hosting status webhook, plus a read of the latest record for the dashboard.
 *
 * The webhook lives in its own encapsulated plugin with a raw-text body parser: §6 wants the
 * exact `400 {error:'Invalid payload'}` for bad JSON (the shared parser answers `Body is not
 * valid JSON`), and hosting platforms do not all send `application/json`.
 */

import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { HostingStatusService } from '../../../domains/hosting-status/index.ts';
import { AppError, badRequest, unauthorized } from '../../../lib/errors.ts';
import type { App } from '../../shared/base-app.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema } from '../../shared/schemas.ts';

const record = z.object({
  status: z.string(),
  name: z.string(),
  message: z.string().nullable(),
  eventType: z.string(),
  receivedAt: z.string(),
});

function providedSecret(request: FastifyRequest): string | undefined {
  const header = request.headers['x-hosting-secret'];
  if (typeof header === 'string') return header;
  const query = (request.query as Record<string, unknown> | undefined)?.secret;
  return typeof query === 'string' ? query : undefined;
}

export const hostingWebhookRoutes = ({ hostingStatus }: { hostingStatus: HostingStatusService }): RouteModule<'public' | 'session'> => ({
  prefix: '/api/webhooks/hosting-status',
  // the webhook's own secret is its credential; any content type is read as text (its plugin only)
  public: async (scope: App) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));

    scope.post('', {
      // before the body is read: an unauthenticated sender learns nothing about payload handling
      onRequest: async (request) => {
        const verdict = hostingStatus.authorize(providedSecret(request));
        if (verdict === 'not_configured') throw new AppError('HOSTING_WEBHOOK_NOT_CONFIGURED', 'Hosting status webhook not configured');
        if (verdict === 'unauthorized') throw unauthorized('Unauthorized');
      },
      schema: {
        tags: ['webhooks'],
        summary: 'Hosting platform status webhook',
        description:
          'The request carries HOSTING_WEBHOOK_SECRET in header `x-hosting-secret` or query `?secret=` (compared in constant ' +
          'time; 401 otherwise). When HOSTING_WEBHOOK_SECRET is unset the webhook is closed: 503 `{error:"Hosting status webhook not configured"}` ' +
          '(the specification accepts all; see docs/security.md). The body must be a JSON object (any content type); otherwise 400 ' +
          '`{error:"Invalid payload"}`. Deployment payloads (`deployment:{id,status,url,service:{name}}`) give eventType `deployment`, ' +
          'name = service name, message = deployment URL; status-page payloads give `incident` (message = newest `incident_updates[].body`) ' +
          'or `component` (message null), name defaulting to `Hosting`; any other object gives eventType = its `type`. Precedence: ' +
          'deployment, incident, component. The record is kept in the database (latest wins, read it with GET) and, when KV_REST_API_URL ' +
          'and KV_REST_API_TOKEN are set, stored under key `hosting-status:latest` with a 7-day TTL; a key-value store failure is logged ' +
          'and the webhook still answers 200.',
        querystring: z.object({ secret: z.string().optional() }).loose(),
        response: { 200: z.object({ received: z.literal(true), record }), ...errorResponses(400, 401, 503) },
      },
      handler: async (request) => {
        let payload: unknown;
        try {
          payload = typeof request.body === 'string' ? JSON.parse(request.body) : undefined;
        } catch {
          payload = undefined;
        }
        if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) throw badRequest('Invalid payload');
        return { received: true as const, record: await hostingStatus.receive(payload as Record<string, unknown>) };
      },
    });
  },

  session: async (app) => {
    app.get('', {
      schema: {
        tags: ['webhooks'],
        summary: 'Latest hosting status record',
        description:
          'The newest record received by the webhook, from our database, for the dashboard: `{record}` or `{record:null}` before any ' +
          'event. Needs a session (401).',
        response: { 200: z.object({ record: record.nullable() }), 401: errorSchema },
      },
      handler: async () => ({ record: await hostingStatus.latest() }),
    });
  },
});
