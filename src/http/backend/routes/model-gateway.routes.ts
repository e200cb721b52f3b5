/**
 * The AI gateway agents call for their model (docs/agents.md "Model access"), in the backend's
 * agentKey scope: `Authorization: Bearer apk_…`, the agent's own platform key, is its only
 * credential (agents never hold ROUTER_API_KEY or another provider key: docs/security.md N5). OpenAI's wire
 * format in and out, errors included (`{error:{message,type,code,param}}`), so the OpenAI client in
 * an agent passes the gateway's refusals on as it would OpenAI's own. Its plugin is the scope of
 * the owner's plan check and the per-agent limit; the logic is in src/domains/ai/model-gateway.service.ts,
 * the request's allow-list and the answer's shape in model-gateway.schemas.ts, OpenAI's error shape
 * and event stream in src/http/shared/openai-wire.ts.
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { z } from 'zod';
import { type Config, MODEL_GATEWAY_PATH } from '../../../config/env.ts';
import { KEY_ID_HEADER } from '../../../config/limits.ts';
import { isAdminUser } from '../../../domains/accounts/index.ts';
import type { AgentCaller } from '../../../domains/agents/index.ts';
import {
  type AiActor,
  type AiService,
  AUTO_MODEL,
  checkStoredPlan,
  completion,
  completionBody,
  modelList,
  type StoredPlan,
  type StoredPlans,
  settleVerdict,
} from '../../../domains/ai/index.ts';
import type { CallSignal } from '../../../lib/cancellation.ts';
import { AppError, unauthorized } from '../../../lib/errors.ts';
import { callingAgent } from '../../shared/agent-key-auth.ts';
import { openAiErrorHandler, openAiErrorSchema, writeOpenAiStream } from '../../shared/openai-wire.ts';
import { addDocumentedHook } from '../../shared/openapi.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { disconnectSignal } from '../../shared/sse.ts';
import { completionSerializerCompiler, completionValidatorCompiler } from './fast-validation.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** the acting user as the AI gateway's plan check decided; null before it ran */
    modelActor: AiActor | null;
  }
}
/** Body fields the gateway reads itself; the others are passed on as `fields`. */
const GATEWAY_OWN_FIELDS: ReadonlySet<string> = new Set(['model', 'messages', 'stream', 'stream_options']);

const errors = {
  401: openAiErrorSchema,
  402: openAiErrorSchema,
  429: openAiErrorSchema,
  500: openAiErrorSchema,
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
    app.setErrorHandler(openAiErrorHandler('agent gateway request failed'));

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
          'error carries `monthlyBudgetUsd`, `monthToDateUsd` and `periodStart` (docs/agents.md "Usage and budgets"). ' +
          "A call the runtime makes for a request the web app forwarded with one of the owner's API keys names that key (header " +
          `\`${KEY_ID_HEADER}\`; a key of anyone else is ignored): the call is recorded with the key and held against the key's monthly ` +
          'budget too, 402 `key_budget_exceeded` (type `insufficient_quota`) once it is spent (docs/payments.md "API keys"). `stream: true` ' +
          'answers `text/event-stream`: `chat.completion.chunk` events, with `stream_options.include_usage` a last chunk with `usage`, then ' +
          '`data: [DONE]`; an upstream failure mid-stream sends `data: {error:{...}}` and ends the stream. A stream the agent aborts is ' +
          `billed from its length when the provider sent no count. ${PLAN_DOC}`,
        body: completionBody,
        response: {
          200: completion,
          400: openAiErrorSchema,
          403: openAiErrorSchema,
          404: openAiErrorSchema,
          413: openAiErrorSchema,
          503: openAiErrorSchema,
          ...errors,
        },
      },
      // the common body (text messages) without zod's copy of every message; any other, and every rejection, is zod's
      validatorCompiler: completionValidatorCompiler(Object.keys(completionBody.shape)),
      // the 200 answer as zod's serializer writes it, without its copy of every choice
      serializerCompiler: completionSerializerCompiler,
      // not an async function: the non-streamed answer is ai.agentCompletion's own promise, not one
      // wrapped around it (docs/benchmarks.md "AI proxy"); the agent's budget is held there
      handler: (request, reply) => {
        const caller = callingAgent(request);
        const keyId = namedKey(request, caller.userId);
        return keyId instanceof Promise ? keyId.then((k) => complete(request, reply, caller, k)) : complete(request, reply, caller, keyId);
      },
    });

    /**
     * The API key the call is made for (docs/payments.md "API keys"): the agent's runtime names it
     * (KEY_ID_HEADER) for a request the agent proxy forwarded with it. Taken only when it is one of
     * the agent's owner's keys, else ignored: an agent naming keys can at most move its own
     * owner's spend between that owner's keys. No header: nothing asked, no promise.
     */
    function namedKey(request: FastifyRequest, userId: string): string | undefined | Promise<string | undefined> {
      const named = request.headers[KEY_ID_HEADER];
      return typeof named === 'string' ? ai.keyBudgets.ofOwner(userId, named) : undefined;
    }

    function complete(
      request: FastifyRequest<{ Body: z.infer<typeof completionBody> }>,
      reply: FastifyReply,
      caller: AgentCaller,
      keyId: string | undefined,
    ) {
      const { agentId } = caller;
      const body = request.body;
      const { model, messages, stream, stream_options } = body;
      // the other listed fields; null means "not given" in OpenAI's clients: nothing null is passed on
      const fields: Record<string, unknown> = {};
      for (const k in body) {
        const v = body[k as keyof typeof body];
        if (v !== undefined && v !== null && !GATEWAY_OWN_FIELDS.has(k)) fields[k] = v;
      }
      const req = { model, agentModel: caller.model, messages, fields, includeUsage: stream_options?.include_usage === true };
      const signal = disconnectSignal(reply);
      // the key rides on the actor: the call is made for it (no object more per call without one)
      const actor = keyId ? { ...actorOf(request), keyId } : actorOf(request);
      if (!stream) return ai.agentCompletion(actor, agentId, req, signal);
      return streamCompletion(actor, reply, agentId, req, signal);
    }

    async function streamCompletion(
      actor: AiActor,
      reply: FastifyReply,
      agentId: string,
      req: Parameters<AiService['agentCompletionStream']>[2],
      signal: CallSignal,
    ) {
      const opened = await ai.agentCompletionStream(actor, agentId, req, signal);
      await writeOpenAiStream(reply.request, reply, opened.chunks, 'agent gateway stream failed');
      return reply;
    }
  },
});
