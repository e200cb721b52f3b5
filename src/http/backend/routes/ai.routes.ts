/**
 * §4.9 AI routes on the backend. Registered inside the bearer-key scope (§5: K on every route)
 * and in their own encapsulated scope so the per-IP limit (§8: AI_RATE_LIMIT per minute) covers
 * exactly /api/ai/*. Plan-required routes run the §4.9/§5 plan middleware before validation.
 * The logic is in src/domains/ai/, the request and answer schemas in src/domains/ai/ai-chat.schemas.ts.
 */

import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { serializerCompiler as zodSerializer } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type Config, isAdminEmail } from '../../../config/env.ts';
import { isAdminUser } from '../../../domains/accounts/index.ts';
import {
  type AiActor,
  type AiService,
  aiHealth,
  aiHealthFailed,
  catalogQuery,
  chatBody,
  chatPaymentError,
  chatResponse,
  chatResponseJson,
  checkPlan,
  checkStoredPlan,
  costEstimate,
  estimateBody,
  modelCatalog,
  PLAN_HEADERS,
  PLAN_HEADERS_DOC,
  PROVIDER_NAMES,
  planError,
  providerModels,
  restrictedError,
  type StoredPlan,
  type StoredPlans,
  selectBody,
  selectedModel,
  settleVerdict,
} from '../../../domains/ai/index.ts';
import { AppError, isAppError } from '../../../lib/errors.ts';
import { addDocumentedHook } from '../../shared/openapi.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders, errorResponses, errorSchema } from '../../shared/schemas.ts';
import { disconnectSignal, writeEventStream } from '../../shared/sse.ts';
import { namedUser } from '../acting-user.ts';
import { chatValidatorCompiler } from './fast-validation.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** the acting user as the AI routes' plan middleware decided; null before it ran */
    aiActor: AiActor | null;
  }
}

const planHeaders = documentedHeaders(PLAN_HEADERS);

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
        response: { 200: aiHealth, 503: aiHealthFailed },
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
        querystring: catalogQuery,
        response: { 200: modelCatalog, 500: errorSchema },
      },
      handler: (request) => ai.listModels({ refresh: request.query.refresh === 'true' || request.query.refresh === '1' }),
    });

    app.get('/models/:provider', {
      schema: {
        tags: ['ai'],
        summary: 'Models of one provider or vendor',
        description: `Models served by the provider (${PROVIDER_NAMES.join(', ')}) or whose id starts with \`<provider>/\`; an unknown name gives an empty list.`,
        params: z.object({ provider: z.string().regex(/^[A-Za-z0-9][\w.-]{0,63}$/, { error: 'Invalid provider' }) }),
        response: { 200: providerModels, 400: errorSchema },
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
        response: { 200: selectedModel, 402: planError, ...errorResponses(400, 404) },
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
          200: costEstimate,
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
        response: { 200: chatResponse, 402: chatPaymentError, 403: restrictedError, ...errorResponses(400, 404, 429, 500, 503) },
      },
      // the hot path (docs/benchmarks.md "AI proxy"): a body and headers zod would pass unchanged
      // are not copied by zod; everything else is validated by zod as before
      validatorCompiler: chatValidatorCompiler(Object.keys(PLAN_HEADERS)),
      // the 200 answer is built by ai.chat in exactly chatResponse's shape: written by picking
      // those fields (unlisted ones still never leave), without a second zod pass over it
      serializerCompiler: (route: { httpStatus?: string; schema: unknown; method: string; url: string }) =>
        route.httpStatus === '200' ? chatResponseJson : zodSerializer(route as never),
      // not an async function: the non-streamed answer is ai.chat's own promise, not one wrapped around it
      handler: (request, reply) => {
        // the body as validated (ai.chat reads its fields; `stream` is not one of them): no copy
        const input = request.body;
        const signal = disconnectSignal(reply);
        if (!input.stream) return ai.chat(actorOf(request), input, signal);
        return ai.chatStream(actorOf(request), input, signal).then(async (opened) => {
          const head = { id: opened.id, model: opened.model, provider: opened.provider };
          await writeEventStream(request, reply, opened.events, {
            frame: (ev) =>
              ev.type === 'delta'
                ? `data: ${JSON.stringify({ ...head, delta: ev.text })}\n\n`
                : `data: ${JSON.stringify({ ...head, message: { role: 'assistant', content: ev.content }, usage: ev.usage, done: true, timestamp: new Date().toISOString() })}\n\ndata: [DONE]\n\n`,
            failure: {
              log: 'ai stream failed',
              frame: `event: error\ndata: ${JSON.stringify({ error: 'AI provider request failed' })}\n\n`,
            },
          });
          return reply;
        });
      },
    });
  },
});
