/**
 * The model catalog (§4.9 GET /api/ai/models): defaults from configuration below, refreshable
 * from the router's `/models` (names, descriptions, prices and context windows change upstream;
 * models the router adds are appended). A model is `available` when its provider's key is set.
 *
 * Ids are `<vendor>/<model>` (§2). Router models use the router's own ids; the direct providers'
 * models use `<provider>/<provider's model id>`, so an id always names exactly one route.
 * Length (~370 lines): mostly data, the default model table with prices and context windows.
 */
import type { Config, ModelPrice } from '../../config/env.ts';
import type { ChatProvider, ProviderName, RemoteModel } from './providers/provider.contract.ts';

export type CatalogModel = {
  id: string;
  name: string;
  provider: ProviderName;
  description: string;
  tags: string[];
  /** USD per input token */
  inputCost: number;
  /** USD per output token */
  outputCost: number;
  contextWindow: number;
  available: boolean;
  /** the id sent upstream (not part of the public shape) */
  upstreamId: string;
  /**
   * Whether the costs are a price someone set (the catalogue, the router's list, MODEL_PRICES, the
   * admin page) rather than 0 for want of one: with AI_BILLING=balance an unpriced model is refused,
   * and the Usage page says "unpriced" (not part of the public shape, §4.9).
   */
  priced: boolean;
};

export type PublicModel = Omit<CatalogModel, 'upstreamId' | 'priced'>;

type Spec = Omit<CatalogModel, 'available' | 'upstreamId' | 'provider' | 'priced'> & { upstreamId?: string };

const perM = (usd: number) => usd / 1_000_000;

/**
 * Router models in plan order: a plan with N models gets the first N (§2: solo 3, collective 5,
 * label 7; network all). Cheap, broadly capable models come first.
 */
export const ROUTER_MODELS: readonly Spec[] = [
  {
    id: 'openai/gpt-4o-mini',
    name: 'GPT-4o mini',
    description: 'Fast, inexpensive general model',
    tags: ['general', 'balanced'],
    inputCost: perM(0.15),
    outputCost: perM(0.6),
    contextWindow: 128_000,
  },
  {
    id: 'google/gemini-2.5-flash',
    name: 'Gemini 2.5 Flash',
    description: 'Fast model with a very long context',
    tags: ['general', 'balanced', 'long-context', 'analysis'],
    inputCost: perM(0.3),
    outputCost: perM(2.5),
    contextWindow: 1_048_576,
  },
  {
    id: 'deepseek/deepseek-chat',
    name: 'DeepSeek V3',
    description: 'Strong open model for code and reasoning',
    tags: ['coding', 'logic'],
    inputCost: perM(0.27),
    outputCost: perM(1.1),
    contextWindow: 163_840,
  },
  {
    id: 'meta-llama/llama-3.3-70b-instruct',
    name: 'Llama 3.3 70B Instruct',
    description: 'Open general-purpose model',
    tags: ['general', 'creative'],
    inputCost: perM(0.13),
    outputCost: perM(0.4),
    contextWindow: 131_072,
  },
  {
    id: 'anthropic/claude-haiku-4.5',
    name: 'Claude Haiku 4.5',
    description: 'Fast Claude model for everyday tasks',
    tags: ['balanced', 'coding', 'creative'],
    inputCost: perM(1),
    outputCost: perM(5),
    contextWindow: 200_000,
  },
  {
    id: 'mistralai/mistral-medium-3.1',
    name: 'Mistral Medium 3.1',
    description: 'Balanced model with good writing',
    tags: ['creative', 'balanced'],
    inputCost: perM(0.4),
    outputCost: perM(2),
    contextWindow: 131_072,
  },
  {
    id: 'anthropic/claude-sonnet-4.5',
    name: 'Claude Sonnet 4.5',
    description: 'Frontier model for coding, agents and analysis',
    tags: ['coding', 'logic', 'analysis', 'creative'],
    inputCost: perM(3),
    outputCost: perM(15),
    contextWindow: 200_000,
  },
  {
    id: 'openai/gpt-4.1',
    name: 'GPT-4.1',
    description: 'Long-context model for code and analysis',
    tags: ['coding', 'analysis', 'long-context'],
    inputCost: perM(2),
    outputCost: perM(8),
    contextWindow: 1_047_576,
  },
  {
    id: 'google/gemini-2.5-pro',
    name: 'Gemini 2.5 Pro',
    description: 'Reasoning model with a very long context',
    tags: ['analysis', 'logic', 'long-context'],
    inputCost: perM(1.25),
    outputCost: perM(10),
    contextWindow: 1_048_576,
  },
  {
    id: 'anthropic/claude-opus-4.1',
    name: 'Claude Opus 4.1',
    description: 'Most capable Claude model',
    tags: ['coding', 'logic', 'analysis', 'creative'],
    inputCost: perM(15),
    outputCost: perM(75),
    contextWindow: 200_000,
  },
  {
    id: 'openai/o3',
    name: 'o3',
    description: 'Reasoning model',
    tags: ['logic', 'analysis'],
    inputCost: perM(2),
    outputCost: perM(8),
    contextWindow: 200_000,
  },
  {
    id: 'x-ai/grok-4',
    name: 'Grok 4',
    description: 'Reasoning model with live knowledge',
    tags: ['analysis', 'creative'],
    inputCost: perM(3),
    outputCost: perM(15),
    contextWindow: 256_000,
  },
];

/** §4.9 Fallbacks: each chained provider's primary and fallback model (catalog ids). */
export const PROVIDER_CHAIN: Record<Exclude<ProviderName, 'custom'>, { primary: string; fallback: string }> = {
  router: { primary: 'openai/gpt-4o-mini', fallback: 'google/gemini-2.5-flash' },
  gemini: { primary: 'gemini/gemini-2.5-flash', fallback: 'gemini/gemini-2.0-flash' },
  groq: { primary: 'groq/llama-3.3-70b-versatile', fallback: 'groq/llama-3.1-8b-instant' },
  anthropic: { primary: 'anthropic/claude-sonnet-4-5', fallback: 'anthropic/claude-haiku-4-5' },
  openai: { primary: 'openai/gpt-4.1-mini', fallback: 'openai/gpt-4.1-nano' },
};

/** Models of the direct (non-router) providers. */
const DIRECT_MODELS: readonly (Spec & { provider: Exclude<ProviderName, 'router' | 'custom'> })[] = [
  {
    provider: 'gemini',
    id: 'gemini/gemini-2.5-flash',
    name: 'Gemini 2.5 Flash (direct)',
    description: 'Gemini through its own API',
    tags: ['general', 'balanced', 'long-context'],
    inputCost: perM(0.3),
    outputCost: perM(2.5),
    contextWindow: 1_048_576,
  },
  {
    provider: 'gemini',
    id: 'gemini/gemini-2.0-flash',
    name: 'Gemini 2.0 Flash (direct)',
    description: 'Gemini through its own API',
    tags: ['general', 'long-context'],
    inputCost: perM(0.1),
    outputCost: perM(0.4),
    contextWindow: 1_048_576,
  },
  {
    provider: 'groq',
    id: 'groq/llama-3.3-70b-versatile',
    name: 'Llama 3.3 70B (Groq)',
    description: 'Low-latency inference',
    tags: ['general', 'balanced'],
    inputCost: perM(0.59),
    outputCost: perM(0.79),
    contextWindow: 131_072,
  },
  {
    provider: 'groq',
    id: 'groq/llama-3.1-8b-instant',
    name: 'Llama 3.1 8B Instant (Groq)',
    description: 'Very low-latency small model',
    tags: ['general'],
    inputCost: perM(0.05),
    outputCost: perM(0.08),
    contextWindow: 131_072,
  },
  {
    provider: 'anthropic',
    id: 'anthropic/claude-sonnet-4-5',
    name: 'Claude Sonnet 4.5 (direct)',
    description: 'Claude through the Messages API',
    tags: ['coding', 'logic', 'analysis', 'creative'],
    inputCost: perM(3),
    outputCost: perM(15),
    contextWindow: 200_000,
  },
  {
    provider: 'anthropic',
    id: 'anthropic/claude-haiku-4-5',
    name: 'Claude Haiku 4.5 (direct)',
    description: 'Claude through the Messages API',
    tags: ['balanced', 'coding'],
    inputCost: perM(1),
    outputCost: perM(5),
    contextWindow: 200_000,
  },
  {
    provider: 'openai',
    id: 'openai/gpt-4.1-mini',
    name: 'GPT-4.1 mini (direct)',
    description: 'OpenAI through its own API',
    tags: ['general', 'balanced', 'coding'],
    inputCost: perM(0.4),
    outputCost: perM(1.6),
    contextWindow: 1_047_576,
  },
  {
    provider: 'openai',
    id: 'openai/gpt-4.1-nano',
    name: 'GPT-4.1 nano (direct)',
    description: 'OpenAI through its own API',
    tags: ['general'],
    inputCost: perM(0.1),
    outputCost: perM(0.4),
    contextWindow: 1_047_576,
  },
];

/** §4.10: the demo offers the first six router models; the first is the default. */
export const DEMO_MODEL_IDS: readonly string[] = ROUTER_MODELS.slice(0, 6).map((m) => m.id);

const upstreamOf = (provider: ProviderName, id: string) => (provider === 'router' ? id : id.slice(id.indexOf('/') + 1));

export type Catalog = {
  /** every model, in catalog order (router models first, in plan order) */
  list(): CatalogModel[];
  get(id: string): CatalogModel | undefined;
  /** models served by `provider`, or whose vendor prefix is `provider` */
  byProviderOrVendor(name: string): CatalogModel[];
  /** the router models in plan order (the only candidates of task selection, §4.9) */
  routerModels(): readonly CatalogModel[];
  /** merges the router's `/models` into the catalog; throws when the router cannot be reached */
  refresh(signal?: AbortSignal): Promise<number>;
  lastRefreshAt(): number | undefined;
  /**
   * The operator's prices (MODEL_PRICES, then the admin page's, which win), USD per million tokens:
   * they replace the catalogue's own for the models named, now and after every refresh.
   */
  setPrices(prices: Record<string, ModelPrice>): void;
};

export function createCatalog(config: Pick<Config, 'AI_CUSTOM_MODEL'>, providers: Record<ProviderName, ChatProvider>): Catalog {
  const available = (p: ProviderName) => providers[p].configured;
  const build = (provider: ProviderName, s: Spec, priced = true): CatalogModel => ({
    ...s,
    tags: [...s.tags],
    provider,
    upstreamId: s.upstreamId ?? upstreamOf(provider, s.id),
    available: false,
    priced,
  });
  const models: CatalogModel[] = [
    ...ROUTER_MODELS.map((s) => build('router', s)),
    ...DIRECT_MODELS.map((s) => build(s.provider, s)),
    build(
      'custom',
      {
        id: `custom/${config.AI_CUSTOM_MODEL}`,
        upstreamId: config.AI_CUSTOM_MODEL,
        name: `Custom (${config.AI_CUSTOM_MODEL})`,
        description: 'Operator-configured OpenAI-compatible endpoint (AI_CUSTOM_BASE_URL); outside the fallback chain',
        tags: ['general'],
        inputCost: 0,
        outputCost: 0,
        contextWindow: 128_000,
      },
      false,
    ),
  ];
  /** each model's own price (the catalogue's or the router's), under the operator's */
  const own = new Map<string, Pick<CatalogModel, 'inputCost' | 'outputCost' | 'priced'>>(
    models.map((m) => [m.id, { inputCost: m.inputCost, outputCost: m.outputCost, priced: m.priced }]),
  );
  let operatorPrices: Record<string, ModelPrice> = {};
  const applyPrices = () => {
    for (const m of models) {
      const set = Object.hasOwn(operatorPrices, m.id) ? operatorPrices[m.id] : undefined;
      const base = own.get(m.id) ?? { inputCost: m.inputCost, outputCost: m.outputCost, priced: m.priced };
      if (set) Object.assign(m, { inputCost: perM(set.input), outputCost: perM(set.output), priced: true });
      else Object.assign(m, base);
    }
  };
  const index = new Map<string, CatalogModel>();
  /**
   * What callers get: each model with `available` filled in, made once and handed out again while
   * its provider's availability stays the same, and the router models' list likewise. Every AI
   * request resolves its model here; a fresh copy of every router model per request was ~3 KB of
   * garbage each (docs/benchmarks.md "AI proxy"). Callers read these, never change them; a
   * refresh (which updates models in place) drops them.
   */
  const views = new Map<CatalogModel, CatalogModel>();
  let routerView: CatalogModel[] | undefined;
  const reindex = () => {
    index.clear();
    views.clear();
    routerView = undefined;
    for (const m of models) if (!index.has(m.id)) index.set(m.id, m);
  };
  reindex();
  let refreshedAt: number | undefined;

  const withAvailability = (m: CatalogModel): CatalogModel => {
    const a = available(m.provider);
    let v = views.get(m);
    if (v?.available !== a) {
      v = { ...m, available: a };
      views.set(m, v);
    }
    return v;
  };

  return {
    list: () => models.map(withAvailability),
    get(id) {
      const m = index.get(id);
      return m ? withAvailability(m) : undefined;
    },
    byProviderOrVendor(name) {
      const prefix = `${name}/`;
      return models.filter((m) => m.provider === name || m.id.startsWith(prefix)).map(withAvailability);
    },
    routerModels() {
      if (!routerView || routerView.some((v) => v.available !== available(v.provider)))
        routerView = models.filter((m) => m.provider === 'router').map(withAvailability);
      return routerView;
    },
    async refresh(signal) {
      const router = providers.router;
      if (!router.listModels) return 0;
      const remote: RemoteModel[] = await router.listModels(signal);
      let added = 0;
      const lastRouter = models.findLastIndex((m) => m.provider === 'router');
      const fresh: CatalogModel[] = [];
      for (const r of remote) {
        const known = index.get(r.id);
        if (known && known.provider === 'router') {
          if (r.name) known.name = r.name;
          if (r.description) known.description = r.description;
          const base = own.get(known.id)!;
          if (r.inputCost !== undefined) base.inputCost = r.inputCost;
          if (r.outputCost !== undefined) base.outputCost = r.outputCost;
          if (r.contextWindow) known.contextWindow = r.contextWindow;
        } else if (!known) {
          const priced = r.inputCost !== undefined && r.outputCost !== undefined;
          const m: CatalogModel = {
            id: r.id,
            upstreamId: r.id,
            name: r.name ?? r.id,
            provider: 'router',
            description: r.description ?? '',
            tags: [],
            inputCost: r.inputCost ?? 0,
            outputCost: r.outputCost ?? 0,
            contextWindow: r.contextWindow ?? 0,
            available: false,
            priced,
          };
          own.set(m.id, { inputCost: m.inputCost, outputCost: m.outputCost, priced });
          fresh.push(m);
          added++;
        }
      }
      // appended after the configured router models, so plan order (first N) never changes
      models.splice(lastRouter + 1, 0, ...fresh);
      applyPrices();
      reindex();
      refreshedAt = Date.now();
      return added;
    },
    lastRefreshAt: () => refreshedAt,
    setPrices(prices) {
      operatorPrices = { ...prices };
      applyPrices();
      reindex();
    },
  };
}

export const toPublicModel = ({ upstreamId: _u, priced: _p, ...m }: CatalogModel): PublicModel => m;
