/**
 * Talking to an agent (docs/agents.md "Talk to your agent"):
 * §4.8 `POST /api/gateway/chat` (WebSocket fallback) and §4.18 `POST /api/chat` (REST chat, our
 * shape, Server-Sent Events with `Accept: text/event-stream`).
 */
import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import type { ChatInput, ChatService } from '../../../domains/chat/index.ts';
import type { Sessions } from '../../../domains/sessions/index.ts';
import { AppError, badRequest, isAppError } from '../../../lib/errors.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';
import { startEventStream } from '../../shared/sse.ts';

const gatewayChatBody = z.object({
  message: z.string().min(1).max(LIMITS.aiMaxMessageChars),
  sessionKey: z.string().min(1).max(128).optional(),
});

const chatMessage = z.object({ role: z.enum(['system', 'user', 'assistant']), content: z.string().max(LIMITS.aiMaxMessageChars) });
const chatBody = z.object({
  agentId: z.string().min(1).max(64).optional().describe('One of your agents; default: your newest running agent'),
  message: z
    .string()
    .min(1)
    .max(LIMITS.aiMaxMessageChars)
    .optional()
    .describe("One message in your dashboard session with the agent: the platform sends the session's history with it"),
  messages: z
    .array(chatMessage)
    .min(1)
    .max(LIMITS.aiMaxMessages)
    .optional()
    .describe('A whole conversation, OpenAI style, sent as it is: stateless, part of no session'),
  model: z.string().min(1).max(200).optional(),
  stream: z.boolean().optional().describe('Server-Sent Events; the same as sending `Accept: text/event-stream`'),
});

const chatResult = z.object({ reply: z.string(), agentId: z.string(), agentName: z.string(), responseMs: z.number() });

/** The refusals of the agent's model call that both chats pass on (docs/agents.md "Talk to your agent"). */
const REFUSALS =
  '403 `MODEL_RESTRICTED` (with `allowedModels`) for a model your plan does not include, 429 `AGENT_BUDGET_EXCEEDED`, ' +
  "`QUOTA_EXCEEDED` or a rate limit (the agent's calls per minute, or the agent busy), 402 `SUBSCRIPTION_REQUIRED`, each with the sentence that says why";
const refusalResponses = { 403: errorSchema.extend({ allowedModels: z.array(z.string()).optional() }), ...errorResponses(402, 429) };

export const chatRoutes = (deps: { chat: ChatService; sessions: Sessions }): RouteModule<'session'> => {
  const { chat, sessions } = deps;

  return {
    prefix: '/api',
    session: async (app) => {
      app.post('/gateway/chat', {
        schema: {
          tags: ['chat'],
          summary: 'Chat with your agent over its WebSocket (§4.8)',
          description:
            'Opens one WebSocket to your agent (your newest running agent, else your newest), sends `message`, and answers with the first ' +
            'reply; 30-second timeout. `sessionKey` (default `main`) is passed to the agent. 404 when you have no agent, 503 when it has no ' +
            "gateway token yet. A refusal of the agent's model call is answered as the agent's own route answers it: " +
            REFUSALS +
            '. 500 `AGENT_ERROR` when the agent answers with another error or cannot be reached (§4.8 gives this route 500, not 502), ' +
            '`AGENT_TIMEOUT` when it does not reply in time.',
          body: gatewayChatBody,
          response: {
            200: z.object({ success: z.literal(true), reply: z.string(), agentId: z.string(), agentName: z.string() }),
            ...refusalResponses,
            ...errorResponses(400, 401, 404, 500, 503),
          },
        },
        handler: async (request) => {
          const user = currentUser(request);
          return chat.gatewayChat(user.id, { message: request.body.message, sessionKey: request.body.sessionKey ?? 'main' });
        },
      });

      app.post('/chat/reset', {
        schema: {
          tags: ['chat'],
          summary: 'Start your dashboard session with an agent over',
          description:
            "The same as sending a reset word (`/new`, `/reset` or the configuration's `session.resetTriggers`) in the dashboard chat: the " +
            'earlier turns of your `dashboard` session are no longer sent to the agent (they stay in GET /api/agents/:id/messages). ' +
            'Works whatever the agent\'s status; 404 for an agent that is not yours (docs/channels.md "Sessions").',
          body: z.object({ agentId: z.string().min(1).max(64) }),
          response: { 200: z.object({ success: z.literal(true) }), ...errorResponses(400, 401, 404) },
        },
        handler: async (request) => {
          await sessions.reset(currentUser(request).id, request.body.agentId, 'dashboard');
          return { success: true as const };
        },
      });

      app.post('/chat', {
        schema: {
          tags: ['chat'],
          summary: 'Chat with one of your agents (REST, streaming with SSE)',
          description:
            'Sends `message` (or a whole `messages` conversation) to the agent `agentId` (default: your newest running agent) through its ' +
            'OpenAI-compatible chat completions endpoint. `message` is one turn of your `dashboard` session with the agent: the platform ' +
            "sends the session's stored history with it (compacted past 80% of the §8 limit of 100,000 tokens), and a reset word (`/new`, " +
            "`/reset` or the configuration's `session.resetTriggers`) starts the session over. `messages` is sent as it is and joins no " +
            'session (docs/channels.md "Sessions"). JSON answer `{reply, agentId, agentName, responseMs}`; with ' +
            '`Accept: text/event-stream` (or `stream: true`) the answer is Server-Sent Events: `event: delta` with `{content}` for each piece ' +
            'of text, then `event: done` with the JSON answer, or `event: error` with `{error, code}` if the agent fails mid-way. ' +
            'The turn (your last message and the whole reply) is stored and appears in GET /api/agents/:id/messages, streamed or not. ' +
            '400 bad body, 401 no session, 404 no such agent of yours, 409 `AGENT_NOT_RUNNING`, 502 `AGENT_UNAVAILABLE` when the agent ' +
            "fails or cannot be reached, 503 `NO_GATEWAY_TOKEN`. A refusal of the agent's model call, before any text (streamed or not), " +
            `is answered as the agent's own route answers it: ${REFUSALS}.`,
          body: chatBody,
          response: {
            200: chatResult.describe('JSON, or text/event-stream when asked (see description)'),
            ...refusalResponses,
            ...errorResponses(400, 401, 404, 409, 502, 503),
          },
        },
        handler: async (request, reply) => {
          const user = currentUser(request);
          const body = request.body;
          if (!body.message && !body.messages) throw badRequest('message or messages is required');
          if (body.message && body.messages) throw badRequest('Send message or messages, not both');
          const messages = body.messages ?? [{ role: 'user' as const, content: body.message! }];
          if (!messages.some((m) => m.role === 'user')) throw badRequest('messages needs at least one user message');
          const input: ChatInput = { agentId: body.agentId, messages, model: body.model };
          const target = await chat.open(user.id, body.agentId);
          // one message is a turn of the dashboard session; a whole conversation is the caller's own
          const answer = (onDelta: (text: string) => void, signal?: AbortSignal) =>
            body.message
              ? sessions
                  .converse(user.id, target.agent.id, {
                    key: 'dashboard',
                    source: 'dashboard',
                    text: body.message,
                    model: body.model,
                    onDelta,
                    signal,
                    target,
                  })
                  .then(({ reply, agentId, agentName, responseMs }) => ({ reply, agentId, agentName, responseMs }))
              : chat.complete(user.id, target, input, onDelta, signal);
          const wantsStream = body.stream === true || String(request.headers.accept ?? '').includes('text/event-stream');
          if (!wantsStream) return answer(() => {});

          // the stream starts with the agent's first piece of text: a refusal before it (a model the
          // plan does not allow, a budget used up) is answered with its status like the JSON answer;
          // once the status is sent, failures become an `error` event
          const abort = new AbortController();
          request.raw.on('close', () => abort.abort());
          let res: ServerResponse | undefined;
          const event = (name: string, data: unknown) => {
            res ??= startEventStream(request, reply);
            if (!res.writableEnded) res.write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
          };
          try {
            const result = await answer((content) => event('delta', { content }), abort.signal);
            event('done', result);
          } catch (err) {
            // the caller left before any text: nothing to answer, and nothing failed on our side
            if (!res) throw abort.signal.aborted ? new AppError('CLIENT_CLOSED', 'Client closed request') : err;
            const e = err as { message?: string; code?: string; status?: number };
            // the error handler never sees it: the one line that says why this answer failed
            if (!abort.signal.aborted && !(isAppError(err) && err.status < 500))
              request.log.error({ err, agentId: target.agent.id }, 'chat stream failed');
            event('error', { error: e.message ?? 'The agent failed', ...(e.code ? { code: e.code } : {}) });
          }
          res?.end();
        },
      });
    },
  };
};
