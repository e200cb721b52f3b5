/**
 * The AI layer (§4.9, §4.10): catalog, chat, streaming, cost estimation and usage. HTTP-free:
 * routes hand in the actor (header context) and a CallSignal (an AbortSignal or a cheaper Cancellation) for client disconnects. Composed of
 * files of one concern each: model routing and fallback (model-routing.service.ts), rate limits and quotas
 * (ai-limits.service.ts), the demo chat (demo-chat.service.ts), the agents' OpenAI-compatible gateway (model-gateway.service.ts)
 * and their monthly budgets (agent-budgets.service.ts).
 */
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';
import type { CallSignal } from '../../lib/cancellation.ts';
import { AppError, badRequest, notFound } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import type { RateLimiter } from '../../lib/rate-limiter.ts';
import { createAgentBudgets } from './agent-budgets.service.ts';
import type { SpendHold, UsageCharge } from './ai.repo.ts';
import { createAiLimits } from './ai-limits.service.ts';
import { type CatalogModel, createCatalog, toPublicModel } from './catalog.service.ts';
import { createDemoChat } from './demo-chat.service.ts';
import { createKeyBudgets } from './key-budgets.service.ts';
import { createModelChoice } from './model-choice.service.ts';
import { createModelGateway, estimatedUsage, pricedOnly } from './model-gateway.service.ts';
import { createModelPrices } from './model-prices.service.ts';
import { createModelRouting, type ProviderObserver, type Served } from './model-routing.service.ts';
import { type AiActor, applyAlgorithmMode, type TaskType } from './plan.rules.ts';
import {
  type ChatMessage,
  type ChatProvider,
  type ChatResult,
  PROVIDER_NAMES,
  type ProviderName,
  type StreamEvent,
  type Usage,
} from './providers/provider.contract.ts';
import { createProviders } from './providers/provider-registry.service.ts';
import { createSpendGuard, createSpendHolds, mostCost } from './spend-holds.service.ts';
import { createUsageStore, type UsageStore } from './usage-store.service.ts';

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

export type AiServiceDeps = {
  config: Config;
  db: Db;
  rateLimiter: RateLimiter;
  /** provider overrides (tests); the configured adapters are the defaults */
  providers?: Partial<Record<ProviderName, ChatProvider>> | undefined;
  usage?: UsageStore | undefined;
  logger?: Logger | undefined;
  now?: (() => Date) | undefined;
  /** told about every provider attempt and fallback (docs/metrics.md); none: no cost */
  providerObserver?: ProviderObserver | undefined;
  /**
   * AI_BILLING=balance (docs/payments.md "Model calls from the balance"): a user's wallet address,
   * and the ledger's charge that pays a batch of usage inside its write.
   */
  billing?:
    | { addressOf(userId: string): Promise<string | undefined>; charge(trx: Kysely<DB>, charges: UsageCharge[]): Promise<void> }
    | undefined;
};

const round = (n: number) => Number(n.toFixed(10));

export function createAiService(deps: AiServiceDeps) {
  const { config, logger } = deps;
  const now = deps.now ?? (() => new Date());
  const providers = createProviders(config, deps.providers);
  const catalog = createCatalog(config, providers);
  const holds = createSpendHolds({ pool: deps.db.pool, logger });
  const billing = config.AI_BILLING === 'balance' ? deps.billing : undefined;
  if (config.AI_BILLING === 'balance' && !billing) throw new Error('AI_BILLING=balance needs the ledger (billing deps)');
  const usage = deps.usage ?? createUsageStore({ db: deps.db, logger, holds, billing });
  const guard = createSpendGuard({ db: deps.db, holds, usage, billing, now });
  const budgets = createAgentBudgets({ db: deps.db, usage, forget: guard.forget, now });
  const modelChoice = createModelChoice({ catalog, customModel: config.AI_CUSTOM_MODEL }); // docs/agents.md "Model"
  // API keys' budgets (docs/payments.md "API keys"): whose a key is, and the proxy's check before a call
  const keyBudgets = createKeyBudgets({ pool: deps.db.pool, usage, holdTtlMs: holds.ttlMs, now });
  // the operator's prices: MODEL_PRICES, and the admin page's from the database (model-prices.service.ts)
  const prices = createModelPrices({ db: deps.db, config, catalog, logger });
  let refreshing: Promise<unknown> | undefined;
  const routing = createModelRouting({ catalog, config, logger, observer: deps.providerObserver });
  const { attemptsFor, resolveModel, selectFor, withFallback } = routing;
  const { limit, limitNow, quotaApplies, enforceQuota } = createAiLimits({ config, rateLimiter: deps.rateLimiter, usage, now, logger });

  // not rounded here: the usage row is written as toFixed(10) text (ai.repo.ts), which rounds it, and
  // a toFixed per call showed in the proxy's profile (docs/benchmarks.md "AI proxy")
  const costOf = (m: Pick<CatalogModel, 'inputCost' | 'outputCost'>, u: Usage) =>
    u.prompt_tokens * m.inputCost + u.completion_tokens * m.outputCost;

  /** `now()` as ISO text, made once per millisecond (every chat answer carries one; toISOString is ~0.4 µs). */
  let isoAt = Number.NaN;
  let iso = '';
  const isoNow = () => {
    const d = now();
    const t = d.getTime();
    if (t !== isoAt) {
      isoAt = t;
      iso = d.toISOString();
    }
    return iso;
  };

  const record = (
    userId: string,
    agentId: string | null | undefined,
    m: CatalogModel,
    u: Usage,
    held?: readonly SpendHold[],
    keyId?: string,
  ) =>
    usage.record(
      {
        userId,
        agentId: agentId ?? null,
        keyId: keyId ?? null,
        model: m.id,
        provider: m.provider,
        promptTokens: u.prompt_tokens,
        completionTokens: u.completion_tokens,
        totalTokens: u.total_tokens,
        cost: costOf(m, u),
        priced: m.priced,
        billTo: billedTo(held),
        createdAt: now(),
      },
      held,
    );
  /** the wallet a call's holds name (its balance hold), which pays its usage */
  const billedTo = (held: readonly SpendHold[] | undefined): string | null => {
    if (!held) return null;
    for (const h of held) if (h.scope.startsWith('balance:')) return h.scope.slice('balance:'.length);
    return null;
  };

  /** The model (plan rules), then the quota: a promise only where there is a quota to read (not network, admins, AI_QUOTA_ENFORCE off). */
  function prepare(actor: AiActor, input: ChatInput) {
    const model = resolveModel(actor, input.model, input.taskType);
    const quota = quotaApplies(actor) ? enforceQuota(actor) : undefined;
    const messages = input.algorithmMode ? applyAlgorithmMode(input.messages) : input.messages;
    let attempts = attemptsFor(model);
    // a platform user's call is capped (its agent's budget) and, billing on, paid from their balance
    const billable = actor.billable === true;
    if (billable && guard.billing) attempts = pricedOnly(attempts);
    const most = () => mostCost(attempts, messages, input.max_tokens);
    // a call made for an API key (a paid gateway plugin's) is held against the key's budget too; it
    // was paid by the plugin's price, so never from the balance as well
    const hold = () =>
      billable
        ? guard.hold({ userId: actor.userId, agentId: input.agentId, keyId: actor.keyId }, most)
        : actor.keyId
          ? guard.hold({ userId: actor.userId, keyId: actor.keyId, prepaid: true }, most)
          : undefined;
    return { attempts, messages, quota, hold };
  }

  /** Runs `call` once the quota and the holds allow it; the holds go back when it fails. */
  function gated<T>(p: ReturnType<typeof prepare>, call: (held: readonly SpendHold[] | undefined) => Promise<T>): Promise<T> {
    const start = () => {
      const holding = p.hold();
      const run = (held: readonly SpendHold[] | undefined) =>
        call(held).catch((err: unknown) => {
          if (held) usage.release(held);
          throw err;
        });
      return holding ? holding.then(run) : run(undefined);
    };
    return p.quota ? p.quota.then(start) : start();
  }

  const params = (
    input: Pick<ChatInput, 'temperature' | 'top_p' | 'max_tokens'>,
    m: CatalogModel,
    messages: ChatMessage[],
    signal: CallSignal,
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
    rateLimit: (ip: string) => limitNow(`ai:${ip}`, config.AI_RATE_LIMIT, LIMITS.aiWindowMs),

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
    /**
     * The catalogue as current as it can be for a decision about which model an agent runs: the
     * router's list read once (waited for, at most a few seconds) before the first such decision in
     * this process, then refreshed in the background when stale, as GET /api/ai/models does.
     */
    async currentCatalog() {
      if (!providers.router.configured) return;
      const first = catalog.lastRefreshAt() === undefined;
      const p = this.listModels();
      if (first && refreshing) await Promise.race([refreshing, new Promise((r) => setTimeout(r, 5_000).unref())]);
      await p;
    },

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
    // `then`s, not an async function (see withFallback): a refusal of prepare() still rejects, never throws
    chat(actor: AiActor, input: ChatInput, signal?: CallSignal): Promise<ChatResponse> {
      let prepared: ReturnType<typeof prepare>;
      try {
        prepared = prepare(actor, input);
      } catch (err) {
        return Promise.reject(err);
      }
      const { attempts, messages } = prepared;
      const answer = (held: readonly SpendHold[] | undefined, { model, result, release }: Served<ChatResult>): ChatResponse => {
        release();
        record(actor.userId, input.agentId, model, result.usage, held, actor.keyId);
        return {
          id: responseId(result),
          model: model.id,
          provider: model.provider,
          message: { role: 'assistant', content: result.content },
          usage: result.usage,
          timestamp: isoNow(),
        };
      };
      return gated(prepared, (held) =>
        withFallback(attempts, signal, (m, s) => providers[m.provider].chat(params(input, m, messages, s))).then((r) => answer(held, r)),
      );
    },

    /**
     * POST /api/ai/chat with `stream: true`. Fallback happens while opening (before the first
     * byte reaches the client); aborting `signal` mid-stream aborts the upstream request.
     */
    async chatStream(actor: AiActor, input: ChatInput, signal: CallSignal): Promise<ChatStream> {
      const prepared = prepare(actor, input);
      const { attempts, messages } = prepared;
      let held: readonly SpendHold[] | undefined;
      const opened = await gated(prepared, (h) => {
        held = h;
        return withFallback(attempts, signal, (m, s) => providers[m.provider].stream(params(input, m, messages, s)));
      });
      const { model, result: upstream, release } = opened;
      const events = (async function* () {
        let content = '';
        let recorded = false;
        try {
          for await (const ev of upstream as AsyncIterable<StreamEvent>) {
            if (ev.type === 'delta') {
              content += ev.text;
              yield ev;
            } else {
              recorded = true;
              record(actor.userId, input.agentId, model, ev.usage, held, actor.keyId);
              yield { type: 'done' as const, usage: ev.usage, content };
            }
          }
        } finally {
          release();
          // a stream cut short is billed from its length, as the model gateway bills one (never free)
          if (!recorded) record(actor.userId, input.agentId, model, estimatedUsage(messages, content.length), held, actor.keyId);
        }
      })();
      return { id: `chatcmpl-${randomUUID()}`, model: model.id, provider: model.provider, events };
    },

    ...createDemoChat({ config, catalog, providers, routing, limit, record, params, responseId }),

    // the AI gateway agents call with their own key (docs/agents.md "Model access")
    ...createModelGateway({
      config,
      catalog,
      providers,
      routing,
      limitNow,
      enforceQuota,
      quotaApplies,
      record,
      guard,
      release: usage.release,
      now,
    }),
    /** agents' monthly budgets: the owner's view and settings (docs/agents.md "Usage and budgets") */
    budgets,
    /** the model an agent runs: the seed's names mapped, the models that can run (docs/agents.md "Model") */
    modelChoice,
    /** API keys' monthly budgets: the gateway's check of a key it is named, the proxy's before a call (docs/payments.md "API keys") */
    keyBudgets,
    /** the operator's model prices (the admin page; docs/payments.md "Model calls from the balance") */
    prices,

    async close() {
      await refreshing;
      await prices.close();
      guard.close();
      await usage.close();
      holds.close();
      await Promise.allSettled(Object.values(providers).map((p) => p.close()));
    },
  };
}

export type AiService = ReturnType<typeof createAiService>;
