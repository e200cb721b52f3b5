/**
 * One agent's usage and its monthly budget (session, owner; ours: §4.9 logs usage per user and
 * model and §4.7 shows no usage route; docs/agents.md "Usage and budgets"). The agent page's Usage
 * tab reads GET /api/agents/:id/usage and sets the budget with PUT /api/agents/:id/budget; the AI
 * gateway refuses the agent's model calls once the budget is used up (agent-budgets.service.ts).
 */

import { z } from 'zod';
import {
  AGENT_BUDGET_MAX_USD,
  AGENT_BUDGET_MIN_USD,
  type AgentBudgets,
  USAGE_DAYS_MAX,
  type UsageReportFn,
} from '../../../domains/ai/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, jsonBody } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';
import { usageDaysQuery, usageReportFields } from './usage.routes.ts';

const BUDGET_RULE = `must be a number greater than 0 and at most ${AGENT_BUDGET_MAX_USD} (USD), or null to clear the budget`;
/** A positive amount below a millionth of a dollar: the column would store it as 0. */
const BUDGET_MIN_RULE = `must be at least ${AGENT_BUDGET_MIN_USD.toFixed(6)} (USD): a budget is kept to 6 decimal places`;

const budget = z
  .object({
    monthlyBudgetUsd: z.number().nullable().describe('USD per UTC calendar month; null: no budget'),
    monthToDateUsd: z.number().describe("USD spent through the AI gateway since periodStart (the agent's model calls)"),
    exceeded: z
      .boolean()
      .describe("month-to-date ≥ budget: the gateway refuses the agent's model calls until the budget is raised or the month ends"),
    periodStart: z.string().describe('first day of the current UTC month, YYYY-MM-DD'),
  })
  .describe("The agent's monthly budget");

const params = z.object({ id: z.string().min(1).max(200) });

export const agentUsageRoutes = (deps: { report: UsageReportFn; budgets: AgentBudgets }): RouteModule<'session'> => ({
  prefix: '/api/agents',
  session: async (app) => {
    app.get('/:id/usage', {
      schema: {
        tags: ['ai'],
        summary: "Your agent's AI usage, cost and budget",
        description:
          "Every model call the agent made through the platform's AI gateway over the last `days` UTC days " +
          `(1 to ${USAGE_DAYS_MAX}, default 30): the same totals, daily and byModel as GET /api/usage, plus \`budget\`. ` +
          '401 without a session, 404 for an agent that is not yours.',
        params,
        querystring: usageDaysQuery,
        response: { 200: z.object({ ...usageReportFields, budget }), ...errorResponses(400, 401, 404) },
      },
      handler: async (request) => {
        const userId = currentUser(request).id;
        // the budget view is also the ownership check (404 before any usage is read)
        const status = await deps.budgets.view(userId, request.params.id);
        const { byAgent: _none, byKey: _noKeys, ...report } = await deps.report(userId, request.query.days, request.params.id);
        return { ...report, budget: status };
      },
    });

    app.put('/:id/budget', {
      schema: {
        tags: ['ai'],
        summary: "Set or clear your agent's monthly budget (USD)",
        description:
          "Caps what the agent may spend on models through the platform's AI gateway in a UTC calendar month. Once the month's cost " +
          "reaches it, the gateway answers the agent's calls with 429 (OpenAI's `insufficient_quota` type, code `budget_exceeded`) " +
          'without contacting the provider, until the budget is raised or cleared or the month ends. Calls in flight when it is ' +
          `reached may overshoot it. \`monthlyBudgetUsd\`: at least ${AGENT_BUDGET_MIN_USD.toFixed(6)} (kept to 6 decimal places), at most ${AGENT_BUDGET_MAX_USD}; null clears it. ` +
          'Answers the budget as GET /api/agents/:id/usage reports it. 400 for anything else, 401 without a session, 404 for an agent that is not yours.',
        params,
        body: jsonBody({
          monthlyBudgetUsd: z
            .number({ error: BUDGET_RULE })
            .gt(0, { error: BUDGET_RULE })
            .gte(AGENT_BUDGET_MIN_USD, { error: BUDGET_MIN_RULE })
            .max(AGENT_BUDGET_MAX_USD, { error: BUDGET_RULE })
            .nullable(),
        }),
        response: { 200: budget, ...errorResponses(400, 401, 404) },
      },
      handler: async (request) => deps.budgets.set(currentUser(request).id, request.params.id, request.body.monthlyBudgetUsd),
    });
  },
});
