/**
 * OpenAI chat-completions adapter: the router (OpenRouter-compatible), and the openai-, groq-,
 * gemini- and custom-type providers, which all accept `POST {base}/chat/completions` with a
 * bearer key.
 */
import type { CallSignal } from '../../../lib/cancellation.ts';
import {
  type ChatParams,
  type ChatProvider,
  normaliseUsage,
  type PassthroughEvent,
  type PassthroughParams,
  ProviderError,
  type ProviderName,
  type RemoteModel,
  type StreamEvent,
  type Usage,
  zeroUsage,
} from './provider.contract.ts';
import { createUpstreamClient, failFromBuffered, failFromStatus, parseJsonBody, parseSse } from './provider-http.client.ts';

export type OpenAiCompatibleOptions = {
  name: ProviderName;
  baseUrl: string;
  /** unset: the provider is unavailable (requests are never sent), unless `enabled` says otherwise */
  apiKey: string | undefined;
  /** overrides "configured = apiKey is set" (a self-hosted custom endpoint may need no key) */
  enabled?: boolean;
  timeoutMs: number;
  /** extra request headers (the router accepts attribution headers) */
  headers?: Record<string, string>;
};

function requestBody(p: ChatParams, stream: boolean): string {
  const body: Record<string, unknown> = { model: p.model, messages: p.messages };
  if (p.temperature !== undefined) body.temperature = p.temperature;
  if (p.top_p !== undefined) body.top_p = p.top_p;
  if (p.max_tokens !== undefined) body.max_tokens = p.max_tokens;
  if (stream) {
    body.stream = true;
    // usage arrives in the last chunk; without it a streamed request could not be billed
    body.stream_options = { include_usage: true };
  }
  return JSON.stringify(body);
}

/** A passthrough body: the allowed fields, then what the gateway fixes (model, messages, streaming with usage). */
function passthroughBody(p: PassthroughParams, stream: boolean): string {
  const body: Record<string, unknown> = { ...p.fields, model: p.model, messages: p.messages };
  if (stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return JSON.stringify(body);
}

const num = (v: unknown): number | undefined => {
  const n = typeof v === 'string' ? Number(v) : v;
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? n : undefined;
};

export function createOpenAiCompatibleProvider(options: OpenAiCompatibleOptions): ChatProvider {
  const client = createUpstreamClient(options.baseUrl, { timeoutMs: options.timeoutMs });
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json',
    ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
    ...options.headers,
  };
  const streamHeaders = { ...headers, accept: 'text/event-stream' };
  const name = options.name;

  const enabled = options.enabled ?? options.apiKey !== undefined;
  const notConfigured = () => new ProviderError(`${name} is not configured`);
  const ensureConfigured = () => {
    if (!enabled) throw notConfigured();
  };

  /**
   * A non-streamed completion: `body(p)` posted, the 2xx answer parsed and handed to `read`. A
   * `then` on the buffered call, not an async function (the proxy's hot path, docs/benchmarks.md
   * "AI proxy", round 7); every failure is still a rejection.
   */
  function completion<P extends { signal?: CallSignal | undefined }, T>(
    p: P,
    body: (p: P, stream: false) => string,
    read: (json: Record<string, any>, p: P) => T,
  ): Promise<T> {
    if (!enabled) return Promise.reject(notConfigured());
    let text: string;
    try {
      text = body(p, false);
    } catch (err) {
      return Promise.reject(err);
    }
    return client.sendBuffered('POST', '/chat/completions', headers, text, p.signal).then((res) => {
      if (res.statusCode < 200 || res.statusCode >= 300) failFromBuffered(res, name);
      return read(parseJsonBody(res.body, name), p);
    });
  }
  const readChat = (json: Record<string, any>, p: ChatParams) => {
    const content = json?.choices?.[0]?.message?.content;
    if (typeof content !== 'string') throw new ProviderError(`${name} sent no message content`);
    return {
      id: typeof json.id === 'string' ? json.id : '',
      model: typeof json.model === 'string' ? json.model : p.model,
      content,
      usage: normaliseUsage(json.usage),
    };
  };
  const readPassthrough = (json: Record<string, any>) => {
    if (!Array.isArray(json?.choices)) throw new ProviderError(`${name} sent no choices`);
    return {
      id: typeof json.id === 'string' ? json.id : '',
      created: typeof json.created === 'number' ? json.created : undefined,
      choices: json.choices as Record<string, unknown>[],
      usage: normaliseUsage(json.usage),
      systemFingerprint: typeof json.system_fingerprint === 'string' ? json.system_fingerprint : undefined,
    };
  };

  /** POST /chat/completions asking for a stream; a refusal is thrown before any chunk is read. */
  const streamed = async (body: string, signal: CallSignal | undefined) => {
    ensureConfigured();
    const res = await client.send('POST', '/chat/completions', streamHeaders, body, signal);
    if (res.statusCode < 200 || res.statusCode >= 300) await failFromStatus(res, name);
    return res;
  };

  /** The JSON objects of a chat completion stream up to `[DONE]`; an `error` object ends it with a ProviderError. */
  async function* chunks(body: AsyncIterable<Buffer>, signal: CallSignal | undefined): AsyncGenerator<Record<string, any>> {
    for await (const msg of parseSse(body, signal)) {
      if (msg.data === '[DONE]') return;
      let chunk: unknown;
      try {
        chunk = JSON.parse(msg.data);
      } catch {
        continue; // comments and keep-alive noise
      }
      if (chunk === null || typeof chunk !== 'object') continue;
      const c = chunk as Record<string, any>;
      if (c.error) throw new ProviderError(`${name} stream error: ${JSON.stringify(c.error).slice(0, 200)}`);
      yield c;
    }
  }

  return {
    name,
    configured: enabled,

    chat: (p) => completion(p, requestBody, readChat),

    async stream(p) {
      const res = await streamed(requestBody(p, true), p.signal);
      return (async function* (): AsyncGenerator<StreamEvent> {
        let id = '';
        let model = p.model;
        let usage: Usage = zeroUsage();
        for await (const chunk of chunks(res.body, p.signal)) {
          if (typeof chunk.id === 'string') id = chunk.id;
          if (typeof chunk.model === 'string') model = chunk.model;
          if (chunk.usage) usage = normaliseUsage(chunk.usage);
          const text = chunk.choices?.[0]?.delta?.content;
          if (typeof text === 'string' && text.length > 0) yield { type: 'delta', text };
        }
        yield { type: 'done', id, model, usage };
      })();
    },

    passthrough: (p) => completion(p, passthroughBody, readPassthrough),

    async passthroughStream(p) {
      const res = await streamed(passthroughBody(p, true), p.signal);
      return (async function* (): AsyncGenerator<PassthroughEvent> {
        let usage: Usage | null = null;
        for await (const chunk of chunks(res.body, p.signal)) {
          if (chunk.usage) usage = normaliseUsage(chunk.usage);
          yield { type: 'chunk', chunk };
        }
        yield { type: 'done', usage };
      })();
    },

    async listModels(signal) {
      ensureConfigured();
      const res = await client.send('GET', '/models', headers, undefined, signal);
      if (res.statusCode < 200 || res.statusCode >= 300) await failFromStatus(res, name);
      const json = (await res.body.json()) as { data?: unknown };
      if (!Array.isArray(json?.data)) throw new ProviderError(`${name} /models sent no data array`);
      const out: RemoteModel[] = [];
      for (const m of json.data as Record<string, any>[]) {
        if (typeof m?.id !== 'string' || m.id.length === 0 || m.id.length > 200) continue;
        out.push({
          id: m.id,
          name: typeof m.name === 'string' ? m.name : undefined,
          description: typeof m.description === 'string' ? m.description.slice(0, 1000) : undefined,
          contextWindow: num(m.context_length),
          inputCost: num(m.pricing?.prompt),
          outputCost: num(m.pricing?.completion),
        });
      }
      return out;
    },

    close: () => client.close(),
  };
}
