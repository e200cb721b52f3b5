/**
 * The AI gateway agents call for their model (docs/agents.md "Model access"), in the backend's
 * agentKey scope: `Authorization: Bearer apk_…`, the agent's own platform key, is its only
 * credential (agents never hold ROUTER_API_KEY or another provider key: docs/security.md N5). OpenAI's wire
 * format in and out, errors included (`{error:{message,type,code,param}}`), so the OpenAI client in
 * an agent passes the gateway's refusals on as it would OpenAI's own. Its plugin is the scope of
 * the owner's plan check and the per-agent limit; the logic is in src/domains/ai/model-gateway.service.ts.
 * Length (~390 lines): OpenAI's request shape as an allow-list with its messages, the error mapping
 * into OpenAI's shape the whole plugin shares, and the SSE writer of the streamed answer.
 */
import type { FastifyError, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { z } from 'zod';
import { type Config, MODEL_GATEWAY_PATH } from '../../../config/env.ts';
import { LIMITS } from '../../../config/limits.ts';
import { isAdminUser } from '../../../domains/accounts/index.ts';
import {
  type AiActor,
  type AiService,
  AUTO_MODEL,
  checkStoredPlan,
  type StoredPlan,
  type StoredPlans,
  settleVerdict,
} from '../../../domains/ai/index.ts';
import type { CallSignal } from '../../../lib/cancellation.ts';
import { AppError, type ErrorCode, isAppError, unauthorized } from '../../../lib/errors.ts';
import { callingAgent } from '../../shared/agent-key-auth.ts';
import { addDocumentedHook } from '../../shared/openapi.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { jsonBody } from '../../shared/schemas.ts';
import { disconnectSignal, sseWriter, startEventStream } from '../../shared/sse.ts';
import { completionSerializerCompiler, completionValidatorCompiler } from './fast-validation.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** the acting user as the AI gateway's plan check decided; null before it ran */
    modelActor: AiActor | null;
  }
}
const MESSAGES_REQUIRED = 'messages must be a non-empty array';
const tokens = (name: string) =>
  z
    .number({ error: `${name} must be a positive integer` })
    .int({ error: `${name} must be a positive integer` })
    .min(1, { error: `${name} must be a positive integer` })
    .max(1_000_000, { error: `${name} is too large` })
    .nullish();
const penalty = (name: string) =>
  z
    .number({ error: `${name} must be a number` })
    .min(-2, { error: `${name} must be between -2 and 2` })
    .max(2, { error: `${name} must be between -2 and 2` })
    .nullish();

/**
 * An OpenAI chat-completions request. What is passed on to the provider is this allow-list:
 * fields a provider would bill or route by outside the plan (a router's `models` fallback list,
 * `provider`, `plugins`) are dropped, like anything else not listed.
 */
/** exported for test/ai/gateway-validation.test.ts, which compares it with the fast check */
export const completionBody = jsonBody({
  model: z
    .string({ error: 'model must be a string' })
    .trim()
    .min(1, { error: 'model must not be empty' })
    .max(200, { error: 'model is too long' })
    .optional()
    .describe(`a model of the owner's plan (GET ${MODEL_GATEWAY_PATH}/models), or \`${AUTO_MODEL}\`/omitted for the plan's pick`),
  messages: z
    .array(
      z.looseObject(
        {
          role: z.enum(['system', 'developer', 'user', 'assistant', 'tool'], {
            error: 'each message role must be system, developer, user, assistant or tool',
          }),
          content: z
            .union(
              [
                z
                  .string()
                  .max(LIMITS.aiMaxMessageChars, { error: `message content must be at most ${LIMITS.aiMaxMessageChars} characters` }),
                z.array(z.looseObject({ type: z.string() })).max(100),
                z.null(),
              ],
              { error: 'message content must be a string, an array of content parts or null' },
            )
            .optional(),
        },
        { error: 'each message must be an object with a role' },
      ),
      { error: MESSAGES_REQUIRED },
    )
    .min(1, { error: MESSAGES_REQUIRED })
    .max(LIMITS.aiMaxMessages, { error: `at most ${LIMITS.aiMaxMessages} messages` })
    .describe('as OpenAI takes them: tool calls, tool results and content parts are passed on as they are'),
  stream: z.boolean({ error: 'stream must be a boolean' }).nullish().describe('true: Server-Sent Events, ending with `data: [DONE]`'),
  stream_options: z
    .object({ include_usage: z.boolean({ error: 'stream_options.include_usage must be a boolean' }).nullish() })
    .nullish()
    .describe('include_usage: a last chunk with `usage` and no choices'),
  temperature: z
    .number({ error: 'temperature must be a number' })
    .min(0, { error: 'temperature must be between 0 and 2' })
    .max(2, { error: 'temperature must be between 0 and 2' })
    .nullish(),
  top_p: z
    .number({ error: 'top_p must be a number' })
    .min(0, { error: 'top_p must be between 0 and 1' })
    .max(1, { error: 'top_p must be between 0 and 1' })
    .nullish(),
  max_tokens: tokens('max_tokens'),
  max_completion_tokens: tokens('max_completion_tokens'),
  stop: z
    .union([z.string().max(1000), z.array(z.string().max(1000)).max(4)], { error: 'stop must be a string or up to 4 strings' })
    .nullish(),
  presence_penalty: penalty('presence_penalty'),
  frequency_penalty: penalty('frequency_penalty'),
  seed: z.number({ error: 'seed must be an integer' }).int({ error: 'seed must be an integer' }).nullish(),
  tools: z
    .array(z.looseObject({ type: z.string() }), { error: 'tools must be an array of tool objects' })
    .max(128)
    .nullish(),
  tool_choice: z
    .union([z.enum(['none', 'auto', 'required']), z.looseObject({ type: z.string() })], { error: 'invalid tool_choice' })
    .nullish(),
  parallel_tool_calls: z.boolean({ error: 'parallel_tool_calls must be a boolean' }).nullish(),
  response_format: z.looseObject({ type: z.string() }, { error: 'response_format must be an object with a type' }).nullish(),
  reasoning_effort: z
    .enum(['minimal', 'low', 'medium', 'high'], { error: 'reasoning_effort must be minimal, low, medium or high' })
    .nullish(),
  logprobs: z.boolean({ error: 'logprobs must be a boolean' }).nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  user: z.string().max(256).nullish(),
});

const usage = z.object({ prompt_tokens: z.number(), completion_tokens: z.number(), total_tokens: z.number() });
/** exported for test/ai/gateway-validation.test.ts, which compares its serializer with the hand-written one */
export const completion = z.object({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.number(),
  model: z.string().describe('the model that served (after any fallback)'),
  provider: z.string(),
  // the provider's choices as they came (tool calls, refusals, logprobs): nothing is dropped
  choices: z.array(
    z.looseObject({
      index: z.number().optional(),
      message: z.looseObject({ role: z.string().optional(), content: z.string().nullable().optional() }).optional(),
      finish_reason: z.string().nullable().optional(),
    }),
  ),
  usage,
  system_fingerprint: z.string().optional(),
});
const openAiError = z
  .object({
    error: z.looseObject({
      message: z.string(),
      type: z.string().describe('invalid_request_error, authentication_error, permission_error, not_found_error, rate_limit_error, ...'),
      code: z
        .string()
        .nullable()
        .describe('a stable identifier: invalid_api_key, model_not_found, model_restricted, insufficient_quota, budget_exceeded, ...'),
      param: z.string().nullable(),
    }),
  })
  .describe("OpenAI's error shape");
const modelList = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      id: z.string(),
      object: z.literal('model'),
      created: z.number(),
      owned_by: z.string(),
      name: z.string(),
      context_length: z.number(),
    }),
  ),
});

/** Body fields the gateway reads itself; the others are passed on as `fields`. */
const GATEWAY_OWN_FIELDS: ReadonlySet<string> = new Set(['model', 'messages', 'stream', 'stream_options']);

/** OpenAI's error `type` by status. */
const TYPE_BY_STATUS: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'insufficient_quota',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'invalid_request_error',
  429: 'rate_limit_error',
};
/** Where OpenAI has its own `code` (and `type`) for the same refusal; otherwise the catalogue's name in lower case. */
const OPENAI_CODES: Partial<Record<ErrorCode, string>> = {
  UNAUTHORIZED: 'invalid_api_key',
  NOT_FOUND: 'model_not_found',
  AI_RATE_LIMITED: 'rate_limit_exceeded',
  QUOTA_EXCEEDED: 'insufficient_quota',
  AGENT_BUDGET_EXCEEDED: 'budget_exceeded',
};
// OpenAI answers a spent quota with 429 `insufficient_quota`; its clients do not retry that type
const OPENAI_TYPES: Partial<Record<ErrorCode, string>> = {
  QUOTA_EXCEEDED: 'insufficient_quota',
  AGENT_BUDGET_EXCEEDED: 'insufficient_quota',
};

type OpenAiErrorBody = z.infer<typeof openAiError>;
const errorBody = (status: number, message: string, code: string, extra: Record<string, unknown> = {}, type?: string): OpenAiErrorBody => ({
  error: {
    message,
    type: type ?? TYPE_BY_STATUS[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error'),
    code,
    param: null,
    ...extra,
  },
});

/** Any error of this plugin (the scope's key check included) in OpenAI's shape, with the status the platform gives it. */
function toOpenAiError(err: FastifyError | AppError, request: FastifyRequest): { status: number; body: OpenAiErrorBody } {
  if (isAppError(err)) {
    if (err.status >= 500) request.log.error({ err }, 'agent gateway request failed');
    const { success: _s, ...extra } = err.extra ?? {};
    const body = errorBody(err.status, err.message, OPENAI_CODES[err.id] ?? err.id.toLowerCase(), extra, OPENAI_TYPES[err.id]);
    return { status: err.status, body };
  }
  if (err.validation) {
    const first = err.validation[0];
    const field = first?.instancePath?.replace(/^\//, '').replace(/\//g, '.');
    const message = first?.message ?? err.message;
    // our schema messages name their field; zod's own ("Invalid input…") get it prefixed
    return { status: 400, body: errorBody(400, field && /^[A-Z]/.test(message) ? `${field}: ${message}` : message, 'invalid_request') };
  }
  if ((err.statusCode ?? 500) < 500) {
    const status = err.statusCode === 413 ? 413 : 400;
    const json = err.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err instanceof SyntaxError;
    return { status, body: errorBody(status, json ? 'Body is not valid JSON' : err.message, 'invalid_request') };
  }
  request.log.error({ err }, 'agent gateway request failed');
  return { status: 500, body: errorBody(500, 'Internal server error', 'unexpected') };
}

const errors = {
  401: openAiError,
  402: openAiError,
  429: openAiError,
  500: openAiError,
};

const PLAN_DOC =
  "The agent's owner's plan applies, as stored for the owner (§2; an active subscription where a card processor is configured, else " +
  '402 `subscription_required`; admins have every model). ' +
  'Each agent may make AGENT_GATEWAY_RATE_LIMIT calls per minute (429 `rate_limit_exceeded` with `Retry-After`). ' +
  'Errors are OpenAI-shaped: `{error:{message,type,code,param}}`; 401 `invalid_api_key` for a missing, unknown or revoked agent key ' +
  '(stopping or deleting the agent revokes it).';

/** The gateway agents reach at AGENT_GATEWAY_URL (docs/agents.md "Model access"). */
export const modelGatewayRoutes = (deps: {
  ai: AiService;
  storedPlans: StoredPlans;
  config: Pick<Config, 'ADMIN_EMAILS' | 'ADMIN_EMAILS_REQUIRE_VERIFIED'>;
  /** whether the owner needs an active subscription (a card processor is configured) */
  subscriptionsRequired: boolean;
}): RouteModule<'agentKey'> => ({
  prefix: MODEL_GATEWAY_PATH,
  agentKey: async (app) => {
    const { ai, config } = deps;
    // the plan middleware's verdict, on the request itself (a decoration: no WeakMap entry per request)
    app.decorateRequest('modelActor', null);

    // every error of these routes, the scope's 401 included, leaves in OpenAI's shape
    app.setErrorHandler((err: FastifyError, request, reply) => {
      const { status, body } = toOpenAiError(err, request);
      const retryAfter = body.error.retryAfter;
      if (status === 429 && typeof retryAfter === 'number') reply.header('retry-after', String(retryAfter));
      return reply.code(status).send(body);
    });

    // the owner's stored plan (cached per process, as for /api/ai) and the agent's own limit, before the body is read
    const decide = (request: FastifyRequest, caller: { userId: string }, stored: StoredPlan | null): AppError | undefined => {
      if (!stored) return unauthorized();
      const verdict = checkStoredPlan(
        stored,
        {},
        {
          subscriptionsRequired: deps.subscriptionsRequired,
          isAdminUser: (facts) => isAdminUser(config, facts),
          userId: caller.userId,
        },
      );
      if (!verdict.ok) return new AppError(verdict.code, verdict.error);
      request.modelActor = verdict.actor;
      return undefined;
    };
    addDocumentedHook(
      app,
      'onRequest',
      // A callback hook: a stored plan already cached is decided without a promise, and the
      // per-agent limit too where the limiter counts in this process (docs/benchmarks.md "AI proxy")
      (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
        const caller = callingAgent(request);
        const limit = (refused: AppError | undefined) => {
          if (refused) return done(refused);
          settleVerdict(ai.agentRateLimit(caller.agentId), done);
        };
        const known = deps.storedPlans.peek(caller.userId);
        if (known !== undefined) return limit(decide(request, caller, known));
        deps.storedPlans.lookup(caller.userId).then((stored) => limit(decide(request, caller, stored)), done);
      },
      {
        responses: {
          402: "`subscription_required`: the agent's owner has no active subscription (where a card processor is configured)",
          429: '`rate_limit_exceeded`: more than AGENT_GATEWAY_RATE_LIMIT calls this minute from this agent; `Retry-After` says when to retry',
        },
      },
    );
    const actorOf = (request: FastifyRequest) => request.modelActor!;

    app.get('/models', {
      schema: {
        tags: ['ai'],
        summary: "Models an agent may use (its owner's plan)",
        description:
          `OpenAI's model list: the models of the owner's plan that a configured provider serves (§2: solo 3, collective 5, label 7, ` +
          `network and admins all). \`${AUTO_MODEL}\` is accepted too and means the plan's pick. ${PLAN_DOC}`,
        response: { 200: modelList, ...errors },
      },
      handler: (request) => ai.agentModels(actorOf(request)),
    });

    app.post('/chat/completions', {
      schema: {
        tags: ['ai'],
        summary: 'Chat completion for an agent (OpenAI-compatible)',
        description:
          "OpenAI's `POST /chat/completions`, for agents: the platform forwards it with its own provider key and records the call as " +
          "usage of the owner, with the agent and the model (GET /api/usage on the web app). `model` must be one of the owner's plan " +
          `(403 \`model_restricted\` with \`allowedModels\`; 404 \`model_not_found\` for a model the catalog does not know) or \`${AUTO_MODEL}\`. ` +
          'Tool calls, tool results and content parts pass through to OpenAI-compatible providers; the Anthropic-type provider takes text ' +
          'only (400 otherwise). 429 `insufficient_quota` when AI_QUOTA_ENFORCE is on and the monthly token quota is used. ' +
          "429 with type `insufficient_quota` and code `budget_exceeded` once the agent's month-to-date cost (UTC calendar month) " +
          'and the calls in flight reached the monthly budget its owner set (PUT /api/agents/:id/budget on the web app): each call holds ' +
          "the most it can cost (its prompt and `max_tokens`, else the rest of the context window, at the model's price) until it " +
          "ends, so concurrent calls overshoot the budget by at most one call's hold; the provider is not contacted, and the " +
          'error carries `monthlyBudgetUsd`, `monthToDateUsd` and `periodStart` (docs/agents.md "Usage and budgets"). `stream: true` ' +
          'answers `text/event-stream`: `chat.completion.chunk` events, with `stream_options.include_usage` a last chunk with `usage`, then ' +
          '`data: [DONE]`; an upstream failure mid-stream sends `data: {error:{...}}` and ends the stream. A stream the agent aborts is ' +
          `billed from its length when the provider sent no count. ${PLAN_DOC}`,
        body: completionBody,
        response: { 200: completion, 400: openAiError, 403: openAiError, 404: openAiError, 413: openAiError, 503: openAiError, ...errors },
      },
      // the common body (text messages) without zod's copy of every message; any other, and every rejection, is zod's
      validatorCompiler: completionValidatorCompiler(Object.keys(completionBody.shape)),
      // the 200 answer as zod's serializer writes it, without its copy of every choice
      serializerCompiler: completionSerializerCompiler,
      // not an async function: the non-streamed answer is ai.agentCompletion's own promise, not one
      // wrapped around it (docs/benchmarks.md "AI proxy"); the agent's budget is held there
      handler: (request, reply) => complete(request, reply, callingAgent(request).agentId),
    });

    function complete(request: FastifyRequest<{ Body: z.infer<typeof completionBody> }>, reply: FastifyReply, agentId: string) {
      const body = request.body;
      const { model, messages, stream, stream_options } = body;
      // the other listed fields; null means "not given" in OpenAI's clients: nothing null is passed on
      const fields: Record<string, unknown> = {};
      for (const k in body) {
        const v = body[k as keyof typeof body];
        if (v !== undefined && v !== null && !GATEWAY_OWN_FIELDS.has(k)) fields[k] = v;
      }
      const req = { model, messages, fields, includeUsage: stream_options?.include_usage === true };
      const signal = disconnectSignal(reply);
      if (!stream) return ai.agentCompletion(actorOf(request), agentId, req, signal);
      return streamCompletion(request, reply, agentId, req, signal);
    }

    async function streamCompletion(
      request: FastifyRequest,
      reply: FastifyReply,
      agentId: string,
      req: Parameters<AiService['agentCompletionStream']>[2],
      signal: CallSignal,
    ) {
      const opened = await ai.agentCompletionStream(actorOf(request), agentId, req, signal);
      const res = startEventStream(request, reply);
      const write = sseWriter(res);
      try {
        for await (const chunk of opened.chunks) {
          if (res.destroyed) break;
          await write(`data: ${JSON.stringify(chunk)}\n\n`);
        }
        await write('data: [DONE]\n\n');
      } catch (err) {
        if (!res.destroyed) {
          request.log.warn({ err: (err as Error).message }, 'agent gateway stream failed');
          await write(`data: ${JSON.stringify(errorBody(500, 'AI provider request failed', 'ai_provider_error'))}\n\n`);
        }
      } finally {
        if (!res.destroyed) res.end();
      }
      return reply;
    }
  },
});
