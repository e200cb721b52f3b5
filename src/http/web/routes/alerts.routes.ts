/**
 * Spend alerts (session; ours: docs/payments.md "Spend alerts"): a threshold on the caller's
 * balance and on each of their agents' monthly spend, told once per crossing by email (SMTP) and
 * to a webhook, and shown here (`state: fired`).
 */
import { z } from 'zod';
import { ALERT_THRESHOLD_MAX_USD, type SpendAlerts } from '../../../domains/spend-alerts/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema, jsonBody } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const THRESHOLD_RULE = `must be a number greater than 0 and at most ${ALERT_THRESHOLD_MAX_USD} (USD), or null to remove the alert`;

const alert = z.object({
  kind: z.enum(['balance', 'budget']).describe('balance: it fell below the threshold; budget: an agent spent the threshold this month'),
  agentId: z.string().nullable().describe('the agent of a budget alert'),
  thresholdUsd: z.number(),
  webhookUrl: z.string().nullable().describe('where the crossing is POSTed (JSON), besides the email'),
  state: z.enum(['armed', 'fired']).describe('armed: waiting for a crossing; fired: told, until it is armed again'),
  firedAt: z.string().nullable(),
  firedValueUsd: z.number().nullable().describe('the balance, or the month-to-date spend, that crossed the threshold'),
});
const alerts = z.object({ alerts: z.array(alert) });

const setting = jsonBody({
  thresholdUsd: z.number({ error: `thresholdUsd ${THRESHOLD_RULE}` }).nullable(),
  webhookUrl: z
    .string({ error: 'webhookUrl must be an http(s) URL' })
    .trim()
    .max(2048, { error: 'webhookUrl must be at most 2048 characters' })
    .nullish()
    .describe('optional: an http(s) URL on a public address (a private or loopback address is refused)'),
});

const TOLD =
  'A crossing is told once: by email to your address when the server has SMTP, and to `webhookUrl` (a JSON POST with `type`, ' +
  '`agentId`, `thresholdUsd`, `valueUsd`, `message`, `at`) when you give one; this list shows it as `fired`. ';

export const alertsRoutes = (deps: { alerts: SpendAlerts }): RouteModule<'session'> => ({
  prefix: '/api',
  session: async (app) => {
    app.get('/alerts', {
      schema: {
        tags: ['wallet'],
        summary: 'Your spend alerts',
        description: `Your balance alert and your agents' budget alerts. ${TOLD}401 without a session.`,
        response: { 200: alerts, 401: errorSchema },
      },
      handler: async (request) => ({ alerts: await deps.alerts.list(currentUser(request).id) }),
    });

    app.put('/alerts/balance', {
      schema: {
        tags: ['wallet'],
        summary: 'Set or remove the alert on your balance',
        description:
          'Tells you when your balance falls below `thresholdUsd` (null removes the alert). ' +
          TOLD +
          'It is armed again once the balance is back at or above the threshold. 400 for a bad threshold or webhook, 401 without a session.',
        body: setting,
        response: { 200: alerts, ...errorResponses(400, 401) },
      },
      handler: async (request) => ({
        alerts: await deps.alerts.set(currentUser(request).id, { kind: 'balance' }, request.body),
      }),
    });

    app.put('/agents/:id/alert', {
      schema: {
        tags: ['wallet'],
        summary: "Set or remove the alert on your agent's monthly spend",
        description:
          "Tells you when the agent's model spend this UTC month reaches `thresholdUsd` (null removes the alert), e.g. before its " +
          `budget is used up. ${TOLD}It is armed again next month. 400 for a bad threshold or webhook, 401 without a session, ` +
          '404 for an agent that is not yours.',
        params: z.object({ id: z.string().min(1).max(200) }),
        body: setting,
        response: { 200: alerts, ...errorResponses(400, 401, 404) },
      },
      handler: async (request) => ({
        alerts: await deps.alerts.set(currentUser(request).id, { kind: 'budget', agentId: request.params.id }, request.body),
      }),
    });
  },
});
