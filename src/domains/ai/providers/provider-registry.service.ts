/** Builds the six provider adapters from configuration (a `Record` so an unwired kind fails to compile). */
import type { Config } from '../../../config/env.ts';
import { createAnthropicProvider } from './anthropic.client.ts';
import { createOpenAiCompatibleProvider } from './openai-compatible.client.ts';
import type { ChatProvider, ProviderName } from './provider.contract.ts';

type AiConfig = Pick<
  Config,
  | 'ROUTER_API_KEY'
  | 'ROUTER_BASE_URL'
  | 'ANTHROPIC_API_KEY'
  | 'ANTHROPIC_BASE_URL'
  | 'OPENAI_API_KEY'
  | 'OPENAI_BASE_URL'
  | 'GROQ_API_KEY'
  | 'GROQ_BASE_URL'
  | 'GEMINI_API_KEY'
  | 'GEMINI_BASE_URL'
  | 'AI_TIMEOUT_MS'
  | 'AI_CUSTOM_BASE_URL'
  | 'AI_CUSTOM_API_KEY'
>;

const FACTORIES: Record<ProviderName, (c: AiConfig) => ChatProvider> = {
  router: (c) =>
    createOpenAiCompatibleProvider({ name: 'router', baseUrl: c.ROUTER_BASE_URL, apiKey: c.ROUTER_API_KEY, timeoutMs: c.AI_TIMEOUT_MS }),
  gemini: (c) =>
    createOpenAiCompatibleProvider({ name: 'gemini', baseUrl: c.GEMINI_BASE_URL, apiKey: c.GEMINI_API_KEY, timeoutMs: c.AI_TIMEOUT_MS }),
  groq: (c) =>
    createOpenAiCompatibleProvider({ name: 'groq', baseUrl: c.GROQ_BASE_URL, apiKey: c.GROQ_API_KEY, timeoutMs: c.AI_TIMEOUT_MS }),
  anthropic: (c) => createAnthropicProvider({ baseUrl: c.ANTHROPIC_BASE_URL, apiKey: c.ANTHROPIC_API_KEY, timeoutMs: c.AI_TIMEOUT_MS }),
  openai: (c) =>
    createOpenAiCompatibleProvider({ name: 'openai', baseUrl: c.OPENAI_BASE_URL, apiKey: c.OPENAI_API_KEY, timeoutMs: c.AI_TIMEOUT_MS }),
  custom: (c) =>
    createOpenAiCompatibleProvider({
      name: 'custom',
      // unset base URL: a placeholder that is never contacted (the provider reports unconfigured)
      baseUrl: c.AI_CUSTOM_BASE_URL ?? 'http://127.0.0.1:9',
      apiKey: c.AI_CUSTOM_API_KEY,
      enabled: c.AI_CUSTOM_BASE_URL !== undefined,
      timeoutMs: c.AI_TIMEOUT_MS,
    }),
};

export function createProviders(
  config: AiConfig,
  overrides: Partial<Record<ProviderName, ChatProvider>> = {},
): Record<ProviderName, ChatProvider> {
  const out = {} as Record<ProviderName, ChatProvider>;
  for (const name of Object.keys(FACTORIES) as ProviderName[]) out[name] = overrides[name] ?? FACTORIES[name](config);
  return out;
}
