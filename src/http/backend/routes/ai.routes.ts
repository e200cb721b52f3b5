/**
 * §4.9 AI routes on the backend. Registered inside the bearer-key scope (§5: K on every route)
 * and in their own encapsulated scope so the per-IP limit (§8: AI_RATE_LIMIT per minute) covers
 * exactly /api/ai/*. Plan-required routes run the §4.9/§5 plan middleware before validation.
 * Length (~400 lines): six §4.9 operations with their schemas, the plan middleware they share and the SSE writer
 * of the streamed chat; the logic is in src/domains/ai/.
 */

import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { serializerCompiler as zodSerializer } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type Config, isAdminEmail } from '../../../config/env.ts';
import { LIMITS } from '../../../config/limits.ts';
import { isAdminUser } from '../../../domains/accounts/index.ts';
import {
  type AiActor,
  type AiService,
  checkPlan,
  checkStoredPlan,
  PROVIDER_NAMES,
  type StoredPlan,
  type StoredPlans,
  SUBSCRIPTION_HEADER,
  settleVerdict,
  TASK_TYPES,
} from '../../../domains/ai/index.ts';
import { AppError, isAppError } from '../../../lib/errors.ts';
import { addDocumentedHook } from '../../shared/openapi.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders, errorSchema, jsonBody } from '../../shared/schemas.ts';
import { disconnectSignal, sseWriter, startEventStream } from '../../shared/sse.ts';
import { namedUser } from '../acting-user.ts';
import { chatValidatorCompiler } from './fast-validation.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** the acting user as the AI routes' plan middleware decided; null before it ran */
    aiActor: AiActor | null;
  }
}

const TASK_TYPE_ERROR = `Invalid taskType: use one of ${TASK_TYPES.join(', ')}`;
const taskType = z.enum(TASK_TYPES, { error: TASK_TYPE_ERROR });

const MESSAGES_REQUIRED = 'Messages array is required';
/** exported for bench/ai-proxy.bench.ts, which measures what validating it costs */
export const chatBody = jsonBody({
  messages: z
    .array(
      z.object(
        {
          role: z.enum(['user', 'assistant', 'system'], { error: 'Each message role must be user, assistant or system' }),
          content: z
            .string({ error: 'Each message content must be a string' })
            .max(LIMITS.aiMaxMessageChars, { error: `Each message content must be at most ${LIMITS.aiMaxMessageChars} characters` }),
        },
        { error: 'Each message must be an object with role and content' },
      ),
      { error: MESSAGES_REQUIRED },
    )
    .min(1, { error: MESSAGES_REQUIRED })
    .max(LIMITS.aiMaxMessages, { error: `At most ${LIMITS.aiMaxMessages} messages` }),
  model: z
    .string({ error: 'Model must be a string' })
    .trim()
    .min(1, { error: 'Model must not be empty' })
    .max(200, { error: 'Unknown model' })
    .optional()
    .describe('`<vendor>/<model>`; omitted: chosen from taskType. Must be allowed by the plan (403 MODEL_RESTRICTED)'),
  taskType: taskType.optional().describe('coding, analysis, creative, long or general (default)'),
  temperature: z
    .number({ error: 'Temperature must be a number' })
    .min(0, { error: 'Temperature must be between 0 and 2' })
    .max(2, { error: 'Temperature must be between 0 and 2' })
    .optional(),
  top_p: z
    .number({ error: 'Parameter top_p must be a number' })
    .min(0, { error: 'Parameter top_p must be between 0 and 1' })
    .max(1, { error: 'Parameter top_p must be between 0 and 1' })
    .optional(),
  max_tokens: z
    .number({ error: 'Parameter max_tokens must be a positive integer' })
    .int({ error: 'Parameter max_tokens must be a positive integer' })
    .min(1, { error: 'Parameter max_tokens must be a positive integer' })
    .max(1_000_000, { error: 'Parameter max_tokens is too large' })
    .optional(),
  algorithmMode: z
    .boolean({ error: 'Parameter algorithmMode must be a boolean' })
    .optional()
    .describe('7-phase structured answers (default false)'),
  stream: z
    .boolean({ error: 'Parameter stream must be a boolean' })
    .optional()
    .describe('true: answer as Server-Sent Events (see description)'),
  agentId: z
    .string({ error: 'Parameter agentId must be a string' })
    .trim()
    .min(1, { error: 'Parameter agentId must not be empty' })
    .max(200, { error: 'Parameter agentId is too long' })
    .optional()
    .describe('added: recorded with the usage row'),
});

const ESTIMATE_REQUIRED = 'Model, inputTokens and outputTokens are required';
const tokenCount = z
  .number({ error: ESTIMATE_REQUIRED })
  .int({ error: 'Token counts must be non-negative integers' })
  .min(0, { error: 'Token counts must be non-negative integers' })
  .max(1_000_000_000, { error: 'Token count too large' });
const estimateBody = jsonBody({
  model: z.string({ error: ESTIMATE_REQUIRED }).trim().min(1, { error: ESTIMATE_REQUIRED }).max(200, { error: 'Unknown model' }),
  inputTokens: tokenCount,
  outputTokens: tokenCount,
});

// a POST without a body is fine (Fastify hands the validator null)
const selectBody = jsonBody({ taskType: taskType.optional() }).nullish();

const publicModel = z.object({
  id: z.string(),
  name: z.string(),
  provider: z.string(),
  description: z.string(),
  tags: z.array(z.string()),
  inputCost: z.number().describe('USD per input token'),
  outputCost: z.number().describe('USD per output token'),
  contextWindow: z.number(),
  available: z.boolean(),
});
const usage = z.object({ prompt_tokens: z.number(), completion_tokens: z.number(), total_tokens: z.number() });
/** exported for bench/ai-proxy.bench.ts, which measures what serializing it costs */
export const chatResponse = z.object({
  id: z.string(),
  model: z.string(),
  provider: z.string(),
  message: z.object({ role: z.literal('assistant'), content: z.string() }),
  usage,
  timestamp: z.string(),
});
const planError = z
  .object({ success: z.literal(false), error: z.string(), code: z.enum(['PLAN_REQUIRED', 'SUBSCRIPTION_REQUIRED']) })
  .describe('402: `PLAN_REQUIRED` (x-user-plan missing or unrecognized) or `SUBSCRIPTION_REQUIRED`');
/** POST /api/ai/chat's 402: the plan refusals, or (AI_BILLING=balance) a platform user's balance that cannot cover the call. */
const chatPaymentError = z
  .object({
    success: z.literal(false).optional(),
    error: z.string(),
    code: z.enum(['PLAN_REQUIRED', 'SUBSCRIPTION_REQUIRED', 'BALANCE_TOO_LOW']),
    balanceUsd: z.number().optional(),
    holdUsd: z.number().optional(),
    heldUsd: z.number().optional(),
  })
  .describe(
    '402: `PLAN_REQUIRED` (x-user-plan missing or unrecognized) or `SUBSCRIPTION_REQUIRED` (`success:false`); with AI_BILLING=balance, ' +
      "`BALANCE_TOO_LOW` when a platform user's balance cannot cover the call's hold (its prompt and max_tokens at the model's price), " +
      'with `balanceUsd`, `holdUsd` and `heldUsd` (docs/payments.md "Model calls from the balance")',
  );
const restricted = z
  .object({
    success: z.literal(false).optional(),
    error: z.string(),
    code: z.string().optional(),
    allowedModels: z.array(z.string()).optional(),
  })
  .describe('403 `{success:false,error,code:"MODEL_RESTRICTED",allowedModels}`; or `{error:"Forbidden"}` for a wrong bearer key');

/** §5 header context and plan middleware, read by the plan-required routes */
const PLAN_HEADERS = {
  'x-user-plan': 'solo, collective, label or network; required (402 PLAN_REQUIRED) unless x-user-email is an admin',
  [SUBSCRIPTION_HEADER]: 'subscription id; required (402 SUBSCRIPTION_REQUIRED) unless x-user-email is an admin',
  'x-user-email': 'the acting user; an email in ADMIN_EMAILS gets network-level access',
  'x-user-id': 'the acting user (default `anonymous`)',
  'x-user-role': "the acting user's role",
};
const planHeaders = documentedHeaders(PLAN_HEADERS);
const PLAN_HEADERS_DOC =
  'Plan middleware (§4.9/§5). When `x-user-id` is a platform user, their stored plan and subscription decide (the plan headers are ' +
  "ignored: a caller cannot raise a user's plan); an active subscription is needed only where a card processor is configured, else 402 " +
  '`SUBSCRIPTION_REQUIRED`; stored admins get network. For any other caller: ' +
  `\`x-user-plan\` (solo, collective, label, network) and \`${SUBSCRIPTION_HEADER}\` are required, else 402 ` +
  '`{success:false,error,code}`; an `x-user-email` in ADMIN_EMAILS bypasses both and gets network-level access. ' +
  'Header context: `x-user-id` (default `anonymous`), `x-user-role`. Models per plan: solo 3, collective 5, label 7, network all.';

/** The AI layer (§4.9), in the bearer scope; its plugin is the scope of the per-IP limit below, so it covers exactly /api/ai/*. */
export const aiRoutes = (deps: {
  ai: AiService;
  config: Pick<Config, 'ADMIN_EMAILS' | 'ADMIN_EMAILS_REQUIRE_VERIFIED'>;
  /** platform users' stored plans (x-user-id naming a user); without it, headers only */
  storedPlans?: StoredPlans;
  /** whether a stored plan needs an active subscription (a card processor is configured) */
  subscriptionsRequired?: boolean;
}): RouteModule<'bearer'> => ({
  prefix: '/api/ai',
  bearer: async (app) => {
    const { ai, config } = deps;
    // the plan middleware's verdict, on the request itself (a decoration: no WeakMap entry per request)
    app.decorateRequest('aiActor', null);

    // §8: AI_RATE_LIMIT requests per minute per IP across /api/ai/* (shared through Redis when set)
    addDocumentedHook(
      app,
      'onRequest',
      // a callback hook: no promise where the limiter decides at once (in-process counters), else the limiter's one
      (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
        settleVerdict(ai.rateLimit(request.ip), (err) => {
          if (isAppError(err) && err.status === 429) reply.header('retry-after', String(err.extra?.retryAfter ?? 60));
          done(err);
        });
      },
      {
        responses: {
          429: 'Too many requests: more than AI_RATE_LIMIT per minute from this IP across /api/ai/* (§8); `Retry-After` says when to retry',
        },
      },
    );

    const adminEmail = (email: string | undefined) => isAdminEmail(config, email);
    const decide = (request: FastifyRequest, userId: string | undefined, stored: StoredPlan | null): AppError | undefined => {
      const verdict = stored
        ? checkStoredPlan(stored, request.headers, {
            subscriptionsRequired: deps.subscriptionsRequired ?? false,
            isAdminUser: (facts) => isAdminUser(config, facts),
            userId: userId!,
          })
        : checkPlan(request.headers, adminEmail);
      if (!verdict.ok) return new AppError(verdict.code, verdict.error, { success: false });
      request.aiActor = verdict.actor;
      return undefined;
    };
    /**
     * §4.9/§5 plan middleware, before body validation (as the original middleware ran). A callback
     * hook: plan headers, and a stored plan already cached, are decided without a promise (the
     * outside client's path); only a stored plan not yet cached waits for its query.
     */
    const requirePlan = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
      const userId = namedUser(request);
      const known = deps.storedPlans && userId ? deps.storedPlans.peek(userId) : null;
      if (known !== undefined) return done(decide(request, userId, known));
      deps.storedPlans!.lookup(userId).then((stored) => done(decide(request, userId, stored)), done);
    };
    const actorOf = (request: FastifyRequest) => request.aiActor!;

    app.get('/health', {
      schema: {
        tags: ['ai'],
        summary: 'AI layer health',
        description:
          '`healthy` when the router (ROUTER_API_KEY) is configured, `degraded` when not. `providers` has one boolean per provider ' +
          `(${PROVIDER_NAMES.join(', ')}). 503 \`{status:'error', error}\` when the usage store cannot be reached.`,
        response: {
          200: z.object({ status: z.enum(['healthy', 'degraded']), providers: z.record(z.string(), z.boolean()), timestamp: z.string() }),
          503: z.object({ status: z.literal('error'), error: z.string() }),
        },
      },
      handler: () => ai.health(),
    });

    app.get('/models', {
      schema: {
        tags: ['ai'],
        summary: 'Model catalog',
        description:
          'Every model with costs in USD per token. `router` says whether the router is configured. The catalog refreshes from the ' +
          "router's `/models` in the background hourly; `?refresh=true` waits for a refresh.",
        querystring: z.object({
          refresh: z.enum(['true', 'false', '1', '0'], { error: 'Parameter refresh must be true or false' }).optional(),
        }),
        response: {
          200: z.object({ models: z.array(publicModel), count: z.number(), router: z.boolean(), timestamp: z.string() }),
          500: errorSchema,
        },
      },
      handler: (request) => ai.listModels({ refresh: request.query.refresh === 'true' || request.query.refresh === '1' }),
    });

    app.get('/models/:provider', {
      schema: {
        tags: ['ai'],
        summary: 'Models of one provider or vendor',
        description: `Models served by the provider (${PROVIDER_NAMES.join(', ')}) or whose id starts with \`<provider>/\`; an unknown name gives an empty list.`,
        params: z.object({ provider: z.string().regex(/^[A-Za-z0-9][\w.-]{0,63}$/, { error: 'Invalid provider' }) }),
        response: {
          200: z.object({ provider: z.string(), models: z.array(publicModel), count: z.number(), timestamp: z.string() }),
          400: errorSchema,
        },
      },
      handler: (request) => ai.modelsFor(request.params.provider),
    });

    app.post('/models/select', {
      preValidation: requirePlan,
      schema: {
        tags: ['ai'],
        summary: 'Pick a model for a task',
        description:
          `${PLAN_HEADERS_DOC} Task tags: coding → coding, logic; analysis → analysis; creative → creative; long → long-context; ` +
          "general → general, balanced. The first of the plan's available router models with a matching tag wins, else the first available. " +
          '404 when no model is available (router not configured).',
        headers: planHeaders,
        body: selectBody,
        response: {
          200: z.object({ model: z.object({ id: z.string(), provider: z.string() }), taskType: z.string(), timestamp: z.string() }),
          400: errorSchema,
          402: planError,
          404: errorSchema,
        },
      },
      handler: (request) => ai.select(actorOf(request), request.body?.taskType ?? 'general'),
    });

    app.post('/estimate-cost', {
      preValidation: requirePlan,
      schema: {
        tags: ['ai'],
        summary: 'Estimate the cost of a request',
        description: `${PLAN_HEADERS_DOC} estimatedCost = inputTokens × inputCost + outputTokens × outputCost (USD). 400 for an unknown model.`,
        headers: planHeaders,
        body: estimateBody,
        response: {
          200: z.object({
            model: z.string(),
            inputTokens: z.number(),
            outputTokens: z.number(),
            estimatedCost: z.number(),
            currency: z.literal('USD'),
            timestamp: z.string(),
          }),
          400: errorSchema,
          402: planError,
        },
      },
      handler: (request) => ai.estimateCost(request.body),
    });

    app.post('/chat', {
      preValidation: requirePlan,
      schema: {
        tags: ['ai'],
        summary: 'Chat completion',
        description:
          `${PLAN_HEADERS_DOC} \`model\` in the answer is the model that served (after any fallback to the provider's fallback model). ` +
          'Algorithm mode prepends a 7-phase system prompt (Observe, Think, Plan, Build, Execute, Verify, Learn) unless a system ' +
          'message already names the phases; trivial greetings are answered naturally. ' +
          '`stream: true` answers `text/event-stream`: `data: {id,model,provider,delta}` events, then ' +
          '`data: {id,model,provider,message,usage,done:true,timestamp}` and `data: [DONE]`; an upstream failure mid-stream sends ' +
          '`event: error` with `{error}`. Disconnecting cancels the upstream request. 429 `QUOTA_EXCEEDED` when AI_QUOTA_ENFORCE is on ' +
          'and the monthly token quota is used (solo 2M, collective 6M, label 20M, network unlimited). 503 `PROVIDER_UNAVAILABLE` when the ' +
          "model's provider has no key. 500 when every attempt failed.",
        headers: planHeaders,
        body: chatBody,
        response: {
          200: chatResponse,
          400: errorSchema,
          402: chatPaymentError,
          403: restricted,
          404: errorSchema,
          429: errorSchema,
          500: errorSchema,
          503: errorSchema,
        },
      },
      // the hot path (docs/benchmarks.md "AI proxy"): a body and headers zod would pass unchanged
      // are not copied by zod; everything else is validated by zod as before
      validatorCompiler: chatValidatorCompiler(Object.keys(PLAN_HEADERS)),
      // the 200 answer is built by ai.chat in exactly chatResponse's shape: written by picking
      // those fields (unlisted ones still never leave), without a second zod pass over it
      serializerCompiler: (route: { httpStatus?: string; schema: unknown; method: string; url: string }) =>
        route.httpStatus === '200' ? serializeChat : zodSerializer(route as never),
      // not an async function: the non-streamed answer is ai.chat's own promise, not one wrapped around it
      handler: (request, reply) => {
        // the body as validated (ai.chat reads its fields; `stream` is not one of them): no copy
        const input = request.body;
        const signal = disconnectSignal(reply);
        if (!input.stream) return ai.chat(actorOf(request), input, signal);
        return ai.chatStream(actorOf(request), input, signal).then(async (opened) => {
          await writeSse(request, reply, opened);
          return reply;
        });
      },
    });
  },
});

/** chatResponse's fields, picked: the same JSON its zod serializer writes for what ai.chat returns. */
function serializeChat(r: z.infer<typeof chatResponse>): string {
  return JSON.stringify({
    id: r.id,
    model: r.model,
    provider: r.provider,
    message: { role: r.message.role, content: r.message.content },
    usage: { prompt_tokens: r.usage.prompt_tokens, completion_tokens: r.usage.completion_tokens, total_tokens: r.usage.total_tokens },
    timestamp: r.timestamp,
  });
}

async function writeSse(request: FastifyRequest, reply: FastifyReply, opened: Awaited<ReturnType<AiService['chatStream']>>) {
  const res = startEventStream(request, reply);
  const head = { id: opened.id, model: opened.model, provider: opened.provider };
  const write = sseWriter(res);
  try {
    for await (const ev of opened.events) {
      if (res.destroyed) break;
      if (ev.type === 'delta') await write(`data: ${JSON.stringify({ ...head, delta: ev.text })}\n\n`);
      else
        await write(
          `data: ${JSON.stringify({ ...head, message: { role: 'assistant', content: ev.content }, usage: ev.usage, done: true, timestamp: new Date().toISOString() })}\n\ndata: [DONE]\n\n`,
        );
    }
  } catch (err) {
    if (!res.destroyed) {
      request.log.warn({ err: (err as Error).message }, 'ai stream failed');
      await write(`event: error\ndata: ${JSON.stringify({ error: 'AI provider request failed' })}\n\n`);
    }
  } finally {
    if (!res.destroyed) res.end();
  }
}
