/**
 * The AI layer (§4.9, §4.10): model catalog and selection, plan rules, chat with per-provider
 * fallback, streaming, cost estimation, usage and quotas, demo chat, and the per-IP limits.
 * HTTP-free: routes hand in the actor (header context) and an AbortSignal for client disconnects.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { AppError, badRequest, notFound } from '../../lib/errors.ts';
import type { RateLimiter } from '../../lib/rate-limiter.ts';
import { type CatalogModel, createCatalog, DEMO_MODEL_IDS, PROVIDER_CHAIN, toPublicModel } from './catalog.ts';
import { type AiActor, allowedModelIds, applyAlgorithmMode, monthlyQuota, selectModel, type TaskType } from './plan-rules.ts';
import { createProviders } from './providers/index.ts';
import {
  type ChatMessage,
  type ChatProvider,
  type ChatResult,
  PROVIDER_NAMES,
  ProviderError,
  type ProviderName,
  type StreamEvent,
  type Usage,
} from './providers/provider.ts';
import { createUsageStore, type UsageStore } from './usage.ts';

export type ChatInput = {
  messages: ChatMessage[];
  model?: string | undefined;
  taskType?: TaskType | undefined;
  temperature?: number | undefined;
  top_p?: number | undefined;
  max_tokens?: number | undefined;
  algorithmMode?: boolean | undefined;
  /** recorded with the usage row (agents calling the AI layer) */
  agentId?: string | undefined;
};

export type ChatResponse = {
  id: string;
  model: string;
  provider: ProviderName;
  message: { role: 'assistant'; content: string };
  usage: Usage;
  timestamp: string;
};

export type ChatStream = {
  id: string;
  model: string;
  provider: ProviderName;
  /** text deltas, then one `done` with the usage and the whole content */
  events: AsyncIterable<{ type: 'delta'; text: string } | { type: 'done'; usage: Usage; content: string }>;
};

export type DemoInput = {
  message: string;
  model?: string | undefined;
  mode?: string | undefined;
  conversation?: unknown[] | undefined;
};

export type AiServiceDeps = {
  config: Config;
  db: Db;
  rateLimiter: RateLimiter;
  /** provider overrides (tests); the configured adapters are the defaults */
  providers?: Partial<Record<ProviderName, ChatProvider>> | undefined;
  usage?: UsageStore | undefined;
  logger?: FastifyBaseLogger | undefined;
  now?: (() => Date) | undefined;
};

export const DEMO_UNAVAILABLE = 'Demo unavailable — service not configured.';
export const DEMO_USER_ID = 'demo';
export const DEMO_AGENT_ID = 'demo-chat';

const clientGone = () => new AppError('CLIENT_CLOSED', 'Client closed request');
const upstreamFailed = () => new AppError('AI_PROVIDER_ERROR', 'AI provider request failed');
const round = (n: number) => Number(n.toFixed(10));

export function createAiService(deps: AiServiceDeps) {
  const { config, logger } = deps;
  const now = deps.now ?? (() => new Date());
  const providers = createProviders(config, deps.providers);
  const catalog = createCatalog(config, providers);
  const usage = deps.usage ?? createUsageStore({ db: deps.db, logger });
  let refreshing: Promise<unknown> | undefined;

  const costOf = (m: Pick<CatalogModel, 'inputCost' | 'outputCost'>, u: Usage) =>
    round(u.prompt_tokens * m.inputCost + u.completion_tokens * m.outputCost);

  const record = (userId: string, agentId: string | null | undefined, m: CatalogModel, u: Usage) =>
    usage.record({
      userId,
      agentId: agentId ?? null,
      model: m.id,
      provider: m.provider,
      promptTokens: u.prompt_tokens,
      completionTokens: u.completion_tokens,
      totalTokens: u.total_tokens,
      cost: costOf(m, u),
      createdAt: now(),
    });

  /** Per-IP fixed window; a limiter outage lets traffic through rather than failing every request. */
  async function limit(key: string, max: number, windowMs: number): Promise<void> {
    let decision: Awaited<ReturnType<typeof deps.rateLimiter.consume>>;
    try {
      decision = await deps.rateLimiter.consume(key, max, windowMs);
    } catch (err) {
      logger?.warn({ err }, 'rate limiter unavailable; request allowed');
      return;
    }
    if (!decision.allowed)
      throw new AppError('AI_RATE_LIMITED', 'Too many requests', { retryAfter: Math.max(1, Math.ceil(decision.retryAfterMs / 1000)) });
  }

  /** §4.9 Fallbacks: the requested model, then its provider's fallback (or primary, when the fallback was asked for). */
  function attemptsFor(m: CatalogModel): CatalogModel[] {
    const out = [m];
    if (m.provider !== 'custom') {
      const chain = PROVIDER_CHAIN[m.provider];
      const next = chain.fallback !== m.id ? chain.fallback : chain.primary;
      const alt = catalog.get(next);
      if (alt && alt.id !== m.id) out.push(alt);
    }
    return out.filter((a) => a.available);
  }

  /** Model resolution with the plan rules: 403 MODEL_RESTRICTED, 404 unknown, 503 provider unset. */
  function resolveModel(actor: AiActor, model: string | undefined, taskType: TaskType | undefined): CatalogModel {
    const allowed = allowedModelIds(actor, catalog.routerModels());
    if (model === undefined) {
      const picked = selectFor(actor, taskType ?? 'general');
      if (!picked) throw notFound('No model available');
      return picked;
    }
    if (allowed && !allowed.includes(model)) {
      throw new AppError('MODEL_RESTRICTED', 'This model is not available on your plan', { success: false, allowedModels: allowed });
    }
    const m = catalog.get(model);
    if (!m) throw notFound('Model not found');
    if (!m.available) throw new AppError('PROVIDER_UNAVAILABLE', `The ${m.provider} provider is not configured`);
    return m;
  }

  function selectFor(actor: AiActor, taskType: TaskType): CatalogModel | undefined {
    const router = catalog.routerModels();
    const allowed = allowedModelIds(actor, router);
    return selectModel(allowed ? router.filter((m) => allowed.includes(m.id)) : router, taskType);
  }

  async function enforceQuota(actor: AiActor): Promise<void> {
    if (!config.AI_QUOTA_ENFORCE) return;
    const quota = monthlyQuota(actor);
    if (!Number.isFinite(quota)) return;
    const used = await usage.monthlyTokens(actor.userId, now());
    if (used >= quota) throw new AppError('QUOTA_EXCEEDED', 'Monthly token quota exceeded', { quota, used });
  }

  /**
   * Runs `run` on each attempt model until one succeeds. Each attempt gets its own AbortSignal:
   * aborted by the client's signal, and by AI_TIMEOUT_MS until `run` resolves. `release` ends the
   * link to the client signal (callers that stream call it when the stream ends).
   */
  async function withFallback<T>(
    attempts: CatalogModel[],
    clientSignal: AbortSignal | undefined,
    run: (m: CatalogModel, signal: AbortSignal) => Promise<T>,
  ): Promise<{ model: CatalogModel; result: T; release: () => void; signal: AbortSignal }> {
    if (attempts.length === 0) throw new AppError('PROVIDER_UNAVAILABLE', 'No configured provider can serve this model');
    let last: unknown;
    for (const m of attempts) {
      if (clientSignal?.aborted) throw clientGone();
      const attempt = new AbortController();
      const onClientAbort = () => attempt.abort(clientSignal?.reason);
      clientSignal?.addEventListener('abort', onClientAbort, { once: true });
      const release = () => clientSignal?.removeEventListener('abort', onClientAbort);
      const timer = setTimeout(() => attempt.abort(new Error('AI_TIMEOUT_MS elapsed')), config.AI_TIMEOUT_MS);
      try {
        const result = await run(m, attempt.signal);
        return { model: m, result, release, signal: attempt.signal };
      } catch (err) {
        release();
        if (clientSignal?.aborted) throw clientGone();
        last = err;
        logger?.warn({ model: m.id, provider: m.provider, err: err instanceof Error ? err.message : String(err) }, 'ai attempt failed');
      } finally {
        clearTimeout(timer);
      }
    }
    if (!(last instanceof ProviderError)) logger?.error({ err: last }, 'ai request failed');
    throw upstreamFailed();
  }

  async function prepare(actor: AiActor, input: ChatInput) {
    const model = resolveModel(actor, input.model, input.taskType);
    await enforceQuota(actor);
    const messages = input.algorithmMode ? applyAlgorithmMode(input.messages) : input.messages;
    return { attempts: attemptsFor(model), messages };
  }

  const params = (
    input: Pick<ChatInput, 'temperature' | 'top_p' | 'max_tokens'>,
    m: CatalogModel,
    messages: ChatMessage[],
    signal: AbortSignal,
  ) => ({
    model: m.upstreamId,
    messages,
    temperature: input.temperature,
    top_p: input.top_p,
    max_tokens: input.max_tokens,
    signal,
  });

  const responseId = (r: Pick<ChatResult, 'id'>) => r.id || `chatcmpl-${randomUUID()}`;

  return {
    catalog,
    providers,
    usage,

    /** §8 AI rate limit: AI_RATE_LIMIT per minute per IP across /api/ai/*. */
    rateLimit: (ip: string) => limit(`ai:${ip}`, config.AI_RATE_LIMIT, LIMITS.aiWindowMs),

    /** GET /api/ai/health: healthy with the router configured, degraded without; 503 when the usage store is down. */
    async health() {
      try {
        await Promise.race([usage.ping(), new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 5_000).unref())]);
      } catch (err) {
        logger?.error({ err }, 'ai health check failed');
        throw new AppError('AI_USAGE_STORE_UNAVAILABLE', 'AI usage store unavailable', { status: 'error' });
      }
      const status = Object.fromEntries(PROVIDER_NAMES.map((n) => [n, providers[n].configured])) as Record<ProviderName, boolean>;
      return { status: status.router ? ('healthy' as const) : ('degraded' as const), providers: status, timestamp: now().toISOString() };
    },

    /** GET /api/ai/models; refreshes from the router's /models when asked or when stale (in the background). */
    async listModels(options: { refresh?: boolean } = {}) {
      if (providers.router.configured) {
        const stale = (catalog.lastRefreshAt() ?? 0) + LIMITS.aiCatalogRefreshMs < Date.now();
        if (options.refresh || (stale && !refreshing)) {
          const p = (refreshing ??= catalog
            .refresh()
            .catch((err) => logger?.warn({ err: (err as Error).message }, 'model catalog refresh failed'))
            .finally(() => {
              refreshing = undefined;
            }));
          if (options.refresh) await p;
        }
      }
      const models = catalog.list().map(toPublicModel);
      return { models, count: models.length, router: providers.router.configured, timestamp: now().toISOString() };
    },

    /** GET /api/ai/models/:provider: models served by that provider or made by that vendor. */
    modelsFor(provider: string) {
      const models = catalog.byProviderOrVendor(provider).map(toPublicModel);
      return { provider, models, count: models.length, timestamp: now().toISOString() };
    },

    /** POST /api/ai/models/select. */
    select(actor: AiActor, taskType: TaskType) {
      const m = selectFor(actor, taskType);
      if (!m) throw notFound('No model available');
      return { model: { id: m.id, provider: m.provider }, taskType, timestamp: now().toISOString() };
    },

    /** POST /api/ai/estimate-cost (USD). */
    estimateCost(input: { model: string; inputTokens: number; outputTokens: number }) {
      const m = catalog.get(input.model);
      if (!m) throw badRequest('Unknown model');
      return {
        model: m.id,
        inputTokens: input.inputTokens,
        outputTokens: input.outputTokens,
        estimatedCost: round(input.inputTokens * m.inputCost + input.outputTokens * m.outputCost),
        currency: 'USD' as const,
        timestamp: now().toISOString(),
      };
    },

    /** POST /api/ai/chat (non-streamed). `model` in the answer is the model that served. */
    async chat(actor: AiActor, input: ChatInput, signal?: AbortSignal): Promise<ChatResponse> {
      const { attempts, messages } = await prepare(actor, input);
      const { model, result, release } = await withFallback(attempts, signal, (m, s) =>
        providers[m.provider].chat(params(input, m, messages, s)),
      );
      release();
      record(actor.userId, input.agentId, model, result.usage);
      return {
        id: responseId(result),
        model: model.id,
        provider: model.provider,
        message: { role: 'assistant', content: result.content },
        usage: result.usage,
        timestamp: now().toISOString(),
      };
    },

    /**
     * POST /api/ai/chat with `stream: true`. Fallback happens while opening (before the first
     * byte reaches the client); aborting `signal` mid-stream aborts the upstream request.
     */
    async chatStream(actor: AiActor, input: ChatInput, signal: AbortSignal): Promise<ChatStream> {
      const { attempts, messages } = await prepare(actor, input);
      const opened = await withFallback(attempts, signal, (m, s) => providers[m.provider].stream(params(input, m, messages, s)));
      const { model, result: upstream, release } = opened;
      const events = (async function* () {
        let content = '';
        try {
          for await (const ev of upstream as AsyncIterable<StreamEvent>) {
            if (ev.type === 'delta') {
              content += ev.text;
              yield ev;
            } else {
              record(actor.userId, input.agentId, model, ev.usage);
              yield { type: 'done' as const, usage: ev.usage, content };
            }
          }
        } finally {
          release();
        }
      })();
      return { id: `chatcmpl-${randomUUID()}`, model: model.id, provider: model.provider, events };
    },

    /** GET /api/demo/chat. */
    demoInfo() {
      const models = DEMO_MODEL_IDS.map((id) => catalog.get(id)!).map((m) => ({ id: m.id, name: m.name, provider: m.provider }));
      return {
        models,
        mode: 'demo' as const,
        message: 'Try the AI models without signing in. Send POST /api/demo/chat with { message, model? }.',
      };
    },

    /** §4.10 demo rate limit: DEMO_RATE_LIMIT per hour per IP. */
    demoRateLimit: (ip: string) => limit(`demo:${ip}`, config.DEMO_RATE_LIMIT, LIMITS.demoWindowMs),

    demoConfigured: () => providers.router.configured,

    /** POST /api/demo/chat (§4.10): router models only, user entries only, max_tokens 1024, no streaming. */
    async demoChat(input: DemoInput, signal?: AbortSignal) {
      if (!providers.router.configured) throw new AppError('DEMO_UNAVAILABLE', DEMO_UNAVAILABLE);
      const modelId = input.model ?? DEMO_MODEL_IDS[0]!;
      if (!DEMO_MODEL_IDS.includes(modelId)) throw badRequest('Invalid model', { models: DEMO_MODEL_IDS });
      const model = catalog.get(modelId)!;
      const cap = LIMITS.demoConversationEntryMax;
      const history: ChatMessage[] = (input.conversation ?? [])
        .filter((e): e is { role: 'user'; content: string } => {
          const x = e as { role?: unknown; content?: unknown } | null;
          return typeof x === 'object' && x !== null && x.role === 'user' && typeof x.content === 'string' && x.content.trim() !== '';
        })
        .slice(-LIMITS.demoConversationMaxEntries)
        .map((e) => ({ role: 'user', content: e.content.slice(0, cap) }));
      let messages: ChatMessage[] = [...history, { role: 'user', content: input.message.slice(0, cap) }];
      if (input.mode === 'algorithm') messages = applyAlgorithmMode(messages);
      let served: Awaited<ReturnType<typeof withFallback<ChatResult>>>;
      try {
        served = await withFallback(attemptsFor(model), signal, (m, s) =>
          providers[m.provider].chat(params({ max_tokens: LIMITS.demoMaxTokens }, m, messages, s)),
        );
      } catch (err) {
        if (err instanceof AppError && err.status === 499) throw err;
        throw new AppError('DEMO_FAILED', 'Failed to get response');
      }
      served.release();
      record(DEMO_USER_ID, DEMO_AGENT_ID, served.model, served.result.usage);
      return {
        id: responseId(served.result),
        model: served.model.id,
        message: served.result.content,
        usage: served.result.usage,
        done: true as const,
      };
    },

    async close() {
      await refreshing;
      await usage.close();
      await Promise.allSettled(Object.values(providers).map((p) => p.close()));
    },
  };
}

export type AiService = ReturnType<typeof createAiService>;
