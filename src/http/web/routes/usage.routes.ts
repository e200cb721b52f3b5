/** The signed-in user's AI usage and cost (ours; the specification shows none). See usage-report.service.ts. */

import { z } from 'zod';
import { USAGE_DAYS_MAX, type UsageReportFn } from '../../../domains/ai/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const totals = {
  requests: z.number(),
  promptTokens: z.number(),
  completionTokens: z.number(),
  totalTokens: z.number(),
  cost: z.number().describe('USD, rounded to 6 decimals: what the priced calls cost (a call of a model without a price adds 0)'),
  unpricedRequests: z
    .number()
    .describe(
      'calls of a model nobody priced (docs/payments.md "Model calls from the balance"): metered at $0 and not in `cost`, ' +
        'so a page says "unpriced" rather than $0.00',
    ),
};

/** `?days=`: the window of a usage report (also GET /api/agents/:id/usage). */
export const usageDaysQuery = z.object({
  days: z.coerce
    .number({ error: 'days must be a number' })
    .int('days must be a whole number')
    .min(1, `days must be 1 to ${USAGE_DAYS_MAX}`)
    .max(USAGE_DAYS_MAX, `days must be 1 to ${USAGE_DAYS_MAX}`)
    .default(30),
});

/** The report's window, totals, days and models (also GET /api/agents/:id/usage). */
export const usageReportFields = {
  days: z.number(),
  from: z.string().describe('first day, YYYY-MM-DD (UTC)'),
  to: z.string().describe('last day (today), YYYY-MM-DD (UTC)'),
  totals: z.object(totals),
  daily: z.array(z.object({ date: z.string(), ...totals })),
  byModel: z.array(
    z.object({
      model: z.string(),
      ...totals,
      priced: z.boolean().describe('false when some of these calls had no price (`unpricedRequests` > 0): their cost is unknown, not $0'),
    }),
  ),
};

export const usageRoutes = (deps: { report: UsageReportFn }): RouteModule<'session'> => {
  return {
    prefix: '/api/usage',
    session: async (app) => {
      app.get('', {
        schema: {
          tags: ['ai'],
          summary: 'My AI usage and cost',
          description:
            `Calls to the AI layer recorded for you (§4.9 usage log) over the last \`days\` UTC days (1 to ${USAGE_DAYS_MAX}, default 30), ` +
            'today included: totals, one entry per day (days without calls are zeros, oldest first), one per model (most expensive first) ' +
            "and one per agent of yours (`byAgent`: every model call an agent made through the platform's AI gateway, most expensive " +
            'first; `name` is null for an agent since deleted) and one per API key of yours (`byKey`: the model calls made for requests ' +
            "with that key through an agent's OpenAI-compatible endpoint or WebSocket, most expensive first; `name` null for a key since " +
            'deleted; docs/payments.md "API keys"). Another user\'s agents and keys never appear (row-level security). One agent\'s ' +
            'usage and its monthly budget: GET /api/agents/:id/usage. A model nobody priced (no catalogue price, none in MODEL_PRICES ' +
            'nor on the admin page) is metered at $0: every entry counts such calls in `unpricedRequests`, and its `byModel` entry ' +
            'says `priced: false`, so its cost reads "unpriced", never $0.00.',
          querystring: usageDaysQuery,
          response: {
            200: z.object({
              ...usageReportFields,
              byAgent: z.array(z.object({ agentId: z.string(), name: z.string().nullable(), ...totals })),
              byKey: z.array(z.object({ keyId: z.string(), name: z.string().nullable(), ...totals })),
            }),
            ...errorResponses(400, 401),
          },
        },
        handler: async (request) => deps.report(currentUser(request).id, request.query.days),
      });
    },
  };
};
