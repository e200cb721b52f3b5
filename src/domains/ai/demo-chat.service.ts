/**
 * The demo chat (§4.10): router models only, user entries only, max_tokens 1024, no streaming,
 * usage logged as `demo` / `demo-chat`, DEMO_RATE_LIMIT per hour per IP. Part of the AI layer.
 */
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { CallSignal } from '../../lib/cancellation.ts';
import { AppError, badRequest } from '../../lib/errors.ts';
import { type Catalog, type CatalogModel, DEMO_MODEL_IDS } from './catalog.service.ts';
import type { createModelRouting, Served } from './model-routing.service.ts';
import { applyAlgorithmMode } from './plan.rules.ts';
import type { ChatMessage, ChatProvider, ChatResult, ProviderName, Usage } from './providers/provider.contract.ts';

export const DEMO_UNAVAILABLE = 'Demo unavailable — service not configured.';
export const DEMO_USER_ID = 'demo';
export const DEMO_AGENT_ID = 'demo-chat';

export type DemoInput = {
  message: string;
  model?: string | undefined;
  mode?: string | undefined;
  conversation?: unknown[] | undefined;
};

export function createDemoChat(deps: {
  config: Pick<Config, 'DEMO_RATE_LIMIT'>;
  catalog: Catalog;
  providers: Record<ProviderName, ChatProvider>;
  routing: ReturnType<typeof createModelRouting>;
  limit: (key: string, max: number, windowMs: number) => Promise<void>;
  record: (userId: string, agentId: string | null, m: CatalogModel, u: Usage) => void;
  params: (
    input: { max_tokens?: number },
    m: CatalogModel,
    messages: ChatMessage[],
    signal: CallSignal,
  ) => Parameters<ChatProvider['chat']>[0];
  responseId: (r: Pick<ChatResult, 'id'>) => string;
}) {
  const { config, catalog, providers, limit, record, params, responseId } = deps;
  const { attemptsFor, withFallback } = deps.routing;
  return {
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
    async demoChat(input: DemoInput, signal?: CallSignal) {
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
      let served: Served<ChatResult>;
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
  };
}
