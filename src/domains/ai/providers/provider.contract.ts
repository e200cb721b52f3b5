/**
 * One interface over every model provider (docs/architecture.md rule 4). The router and the openai-, groq-,
 * gemini- and custom-type providers speak the OpenAI chat-completions wire format
 * (openai-compatible.client.ts); the anthropic-type provider speaks the Messages API (anthropic.client.ts).
 * The domain never sees a vendor SDK: only these types.
 */

import type { CallSignal } from '../../../lib/cancellation.ts';

/** §4.9 Fallbacks: the five chained providers, plus `custom`, the sixth configuration outside the chain. */
export const PROVIDER_NAMES = ['router', 'gemini', 'groq', 'anthropic', 'openai', 'custom'] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

export type ChatRole = 'system' | 'user' | 'assistant';
export type ChatMessage = { role: ChatRole; content: string };

export type ChatParams = {
  /** the provider's own model id (catalog `upstreamId`) */
  model: string;
  messages: ChatMessage[];
  temperature?: number | undefined;
  top_p?: number | undefined;
  max_tokens?: number | undefined;
  /** aborts the upstream request (client disconnect or the per-attempt timeout); an AbortSignal will do */
  signal?: CallSignal | undefined;
};

export type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

export type ChatResult = { id: string; model: string; content: string; usage: Usage };

export type StreamEvent = { type: 'delta'; text: string } | { type: 'done'; id: string; model: string; usage: Usage };

/**
 * An OpenAI chat-completions request passed on as it is (the agent gateway, docs/agents.md "Model
 * access"): `messages` as the caller wrote them (tool calls and results, content parts) and
 * `fields`, the request options the gateway lets through (tools, sampling, response format).
 */
export type PassthroughParams = {
  /** the provider's own model id (catalog `upstreamId`) */
  model: string;
  messages: Record<string, unknown>[];
  fields: Record<string, unknown>;
  signal?: CallSignal | undefined;
};

/** A non-streamed passthrough answer: the upstream's choices untouched (tool calls included). */
export type PassthroughResult = {
  id: string;
  created: number | undefined;
  choices: Record<string, unknown>[];
  usage: Usage;
  systemFingerprint: string | undefined;
};

/** A streamed passthrough answer: the upstream's chunks, then one `done` with the usage (null when none came). */
export type PassthroughEvent = { type: 'chunk'; chunk: Record<string, unknown> } | { type: 'done'; usage: Usage | null };

/** A model as the router's `/models` describes it (costs per token, USD). */
export type RemoteModel = {
  id: string;
  name?: string | undefined;
  description?: string | undefined;
  contextWindow?: number | undefined;
  inputCost?: number | undefined;
  outputCost?: number | undefined;
};

export interface ChatProvider {
  readonly name: ProviderName;
  /** false when the provider's API key is unset: the provider is unavailable. */
  readonly configured: boolean;
  /** One non-streamed completion. Throws ProviderError on any upstream failure. */
  chat(params: ChatParams): Promise<ChatResult>;
  /**
   * Opens a streamed completion. Resolves once the upstream has accepted the request (2xx
   * headers), so a caller can still fall back before it has sent anything to its client; the
   * returned iterable then yields text deltas and one final `done`.
   */
  stream(params: ChatParams): Promise<AsyncIterable<StreamEvent>>;
  /**
   * OpenAI wire format in and out, for callers that speak it themselves (agents through the AI
   * gateway). Only OpenAI-compatible providers have it; the others are reached through `chat`.
   * Errors as `chat` (ProviderError).
   */
  passthrough?(params: PassthroughParams): Promise<PassthroughResult>;
  /** The streamed `passthrough`; resolves once the upstream accepted the request, as `stream` does. */
  passthroughStream?(params: PassthroughParams): Promise<AsyncIterable<PassthroughEvent>>;
  /** The upstream model list (the router's `/models`); absent where the catalog is static. */
  listModels?(signal?: AbortSignal): Promise<RemoteModel[]>;
  /** Closes the keep-alive connection pool. */
  close(): Promise<void>;
}

export class ProviderError extends Error {
  override name = 'ProviderError';
  /** upstream HTTP status, when there was a response */
  readonly status: number | undefined;
  /** true when the request was aborted (client gone or timeout) rather than failed */
  readonly aborted: boolean;
  /** the upstream's own error message, when its error body had one (never contains our key: see http.ts) */
  readonly upstreamMessage: string | undefined;
  constructor(message: string, options: { status?: number; aborted?: boolean; cause?: unknown; upstreamMessage?: string } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status;
    this.aborted = options.aborted ?? false;
    this.upstreamMessage = options.upstreamMessage;
  }
}

export const zeroUsage = (): Usage => ({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });

const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/** Normalises an OpenAI-style usage object; totals are recomputed when absent. */
export function normaliseUsage(raw: unknown): Usage {
  const u = (raw ?? {}) as Record<string, unknown>;
  const prompt = count(u.prompt_tokens ?? u.input_tokens);
  const completion = count(u.completion_tokens ?? u.output_tokens);
  const total = count(u.total_tokens) || prompt + completion;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total };
}
