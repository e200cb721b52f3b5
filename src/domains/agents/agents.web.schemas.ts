/**
 * The zod schemas of the web agent API (src/http/web/routes/agents.web.routes.ts, §4.7): what
 * the larger operations take and answer.
 */
import { z } from 'zod';
import { LIMITS } from '../../config/limits.ts';
import { agentName, configObject, gitInitField } from './agents.schemas.ts';

/** One agent as the web app lists it. */
export const webAgent = z.object({
  id: z.string(),
  name: z.string(),
  model: z.string(),
  status: z.string(),
  websocketUrl: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
/** GET /api/agents */
export const webAgentList = z.object({ agents: z.array(webAgent), count: z.number(), status: z.literal('ok') });
/** GET /api/agents/models and /api/agents/:id/models (docs/agents.md "Model") */
export const agentModels = z.object({
  models: z.array(z.object({ id: z.string(), name: z.string(), provider: z.string() })),
  count: z.number(),
  default: z.string().nullable(),
});
/** `limit` of the web lists: capped, not refused, above the maximum. */
export const listLimit = z.coerce
  .number({ error: 'limit must be a number' })
  .int({ error: 'limit must be an integer' })
  .min(1, { error: 'limit must be at least 1' })
  .transform((n) => Math.min(n, LIMITS.agentListMax))
  .default(LIMITS.agentListDefault)
  .describe(`default ${LIMITS.agentListDefault}, at most ${LIMITS.agentListMax} (larger values are capped)`);

/** GET /api/agents/:id/logs */
export const webLogsQuery = z.object({
  limit: listLimit,
  level: z.enum(['debug', 'info', 'warn', 'error'], { error: 'level must be debug, info, warn or error' }).optional(),
});

/** POST /api/agents/provision */
export const provisionBody = z
  .object(
    {
      name: agentName,
      model: z
        .string({ error: 'model must be a string' })
        .trim()
        .min(1, { error: 'model must not be empty' })
        .max(200, { error: 'model too long' })
        .optional(),
      config: configObject.optional(),
      tier: z.enum(['starter', 'pro', 'enterprise'], { error: 'tier must be starter, pro or enterprise' }).optional(),
      gitInit: gitInitField,
    },
    { error: 'Request body must be a JSON object' },
  )
  .loose();
export const provisioned = z.object({
  success: z.literal(true),
  agent: z.object({
    id: z.string(),
    name: z.string(),
    status: z.string(),
    websocketUrl: z.string(),
    model: z.string(),
    createdAt: z.string(),
  }),
});

/** PATCH /api/agents/:id */
export const renamedAgent = z.object({
  success: z.literal(true),
  agent: z.object({ id: z.string(), name: z.string(), status: z.string(), updatedAt: z.string() }),
});

/** GET /api/agents/:id/messages */
export const messagesQuery = z.object({
  limit: listLimit,
  offset: z.coerce
    .number({ error: 'offset must be a number' })
    .int()
    .min(0, { error: 'offset must be at least 0' })
    .max(1_000_000)
    .default(0),
  session: z.string().min(1).max(200).optional().describe('only the messages of this conversation session, e.g. `dashboard`'),
});
export const agentMessagesPage = z.object({
  messages: z.array(
    z.object({
      id: z.string(),
      agentId: z.string(),
      sender: z.string(),
      content: z.string(),
      timestamp: z.string(),
      platform: z.string().describe('where it came from: dashboard, api, websocket, telegram, discord'),
      session: z.string().nullable().describe('its conversation session; null for a stateless API call'),
    }),
  ),
  total: z.number(),
  limit: z.number(),
  offset: z.number(),
  status: z.literal('ok'),
});

/** GET /api/agents/:id/stats */
export const agentStats = z.object({
  stats: z.object({
    agentId: z.string(),
    cpu: z.number(),
    memory: z.number(),
    memoryPercent: z.number(),
    network: z.object({ rxBytes: z.number(), txBytes: z.number() }),
    uptime: z.number(),
    uptimeFormatted: z.string(),
    status: z.string(),
    pids: z.number(),
    messagesProcessed: z.number(),
    messagesPerHour: z.number(),
    averageResponseTime: z.number(),
    successRate: z.number(),
    errorRate: z.number(),
  }),
  status: z.enum(['ok', 'mock']),
});
