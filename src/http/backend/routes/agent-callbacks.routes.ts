/**
 * Routes agents call back on, authenticated by the agent's own scoped platform key
 * (`Authorization: Bearer apk_…`, issued per agent at deploy time) rather than INTERNAL_API_KEY,
 * which agents never receive (docs/architecture.md rule 6).
 */
import { z } from 'zod';
import type { AgentCallbacks } from '../../../domains/agents/index.ts';
import { callingAgent } from '../../shared/agent-key-auth.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, jsonBody } from '../../shared/schemas.ts';

/** §4.7 logs/messages listing caps at 100; one report carries one turn, so 20 is generous. */
const MAX_MESSAGES_PER_REPORT = 20;
const MAX_MESSAGE_CHARS = 32_000;

const message = z.object({
  sender: z.enum(['user', 'agent', 'system'], { error: 'sender must be user, agent or system' }),
  content: z
    .string({ error: 'content required' })
    .min(1, { error: 'content required' })
    .max(MAX_MESSAGE_CHARS, { error: `content must be at most ${MAX_MESSAGE_CHARS} characters` }),
  platform: z.string().max(64).optional(),
  responseMs: z.number().int().min(0).max(3_600_000).optional(),
  failed: z.boolean().optional(),
});

/** Mounted in the backend's agentKey scope (../../shared/agent-key-auth.ts): the key is checked before the body is read. */
export const agentCallbackRoutes = (deps: { callbacks: Pick<AgentCallbacks, 'recordAgentMessages'> }): RouteModule<'agentKey'> => ({
  prefix: '/api/agent-callbacks',
  agentKey: async (app) => {
    app.post('/messages', {
      schema: {
        tags: ['agents'],
        summary: 'An agent reports chat messages',
        description:
          "Called by an agent's runtime after each answered chat turn, with the agent's own platform key as the Bearer token. " +
          'The key decides which agent and owner the messages belong to; they appear in GET /api/agents/:id/messages on the web API. ' +
          `At most ${MAX_MESSAGES_PER_REPORT} messages per call, ${MAX_MESSAGE_CHARS} characters each.`,
        body: jsonBody({
          messages: z
            .array(message, { error: 'messages must be an array' })
            .min(1, { error: 'messages required' })
            .max(MAX_MESSAGES_PER_REPORT, { error: `at most ${MAX_MESSAGES_PER_REPORT} messages per call` }),
        }),
        response: { 201: z.object({ agentId: z.string(), stored: z.number() }), ...errorResponses(400, 401) },
      },
      handler: async (request, reply) =>
        reply.code(201).send(await deps.callbacks.recordAgentMessages(callingAgent(request), request.body.messages)),
    });
  },
});
