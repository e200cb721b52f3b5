/**
 * §4.10 demo chat on the web app: no sign-in, router models only, per-IP limit
 * (DEMO_RATE_LIMIT per hour), max_tokens 1024, no streaming.
 */
import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import { type AiService, DEMO_UNAVAILABLE } from '../../../domains/ai/index.ts';
import { AppError, isAppError } from '../../../lib/errors.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';

const MESSAGE_REQUIRED = 'Message required';

const demoBody = z.object(
  {
    message: z
      .string({ error: MESSAGE_REQUIRED })
      .trim()
      .min(1, { error: MESSAGE_REQUIRED })
      .describe(`Cut to ${LIMITS.demoConversationEntryMax} characters`),
    model: z
      .string({ error: 'Invalid model' })
      .max(200, { error: 'Invalid model' })
      .optional()
      .describe('One of the GET models; default the first'),
    mode: z
      .string({ error: 'Invalid mode' })
      .max(32, { error: 'Invalid mode' })
      .optional()
      .describe('`algorithm` turns on the 7-phase algorithm mode; anything else is plain chat'),
    conversation: z
      .array(z.unknown(), { error: 'conversation must be an array' })
      .max(1000, { error: 'conversation is too long' })
      .optional()
      .describe(
        `Earlier turns; only \`user\` entries are kept (the last ${LIMITS.demoConversationMaxEntries}), each cut to ${LIMITS.demoConversationEntryMax} characters`,
      ),
  },
  { error: MESSAGE_REQUIRED },
);

export const demoRoutes = (deps: { ai: AiService }): RouteModule<'public'> => {
  const { ai } = deps;

  return {
    prefix: '/api/demo',
    public: async (app) => {
      app.get('/chat', {
        schema: {
          tags: ['demo'],
          summary: 'Demo chat models',
          response: {
            200: z.object({
              models: z.array(z.object({ id: z.string(), name: z.string(), provider: z.string() })),
              mode: z.literal('demo'),
              message: z.string(),
            }),
          },
        },
        handler: () => ai.demoInfo(),
      });

      app.post('/chat', {
        schema: {
          tags: ['demo'],
          summary: 'Demo chat without sign-in',
          description:
            `max_tokens fixed at ${LIMITS.demoMaxTokens}; no streaming. Limited per IP (DEMO_RATE_LIMIT per hour): 429 \`Too many requests\`. ` +
            `400 \`Message required\`; 500 \`Failed to get response\`; 503 \`${DEMO_UNAVAILABLE}\` when ROUTER_API_KEY is unset. ` +
            'Each success logs usage as user `demo`, agent `demo-chat`.',
          body: demoBody,
          response: {
            200: z.object({
              id: z.string(),
              model: z.string(),
              message: z.string(),
              usage: z.object({ prompt_tokens: z.number(), completion_tokens: z.number(), total_tokens: z.number() }),
              done: z.literal(true),
            }),
            ...errorResponses(400, 429, 500, 503),
          },
        },
        handler: async (request, reply) => {
          if (!ai.demoConfigured()) throw new AppError('DEMO_UNAVAILABLE', DEMO_UNAVAILABLE);
          try {
            await ai.demoRateLimit(request.ip);
          } catch (err) {
            if (isAppError(err) && err.status === 429) reply.header('retry-after', String(err.extra?.retryAfter ?? 3600));
            throw err;
          }
          const controller = new AbortController();
          reply.raw.once('close', () => {
            if (!reply.raw.writableFinished) controller.abort();
          });
          return ai.demoChat(request.body, controller.signal);
        },
      });
    },
  };
};
