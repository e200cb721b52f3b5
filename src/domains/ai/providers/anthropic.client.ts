/**
 * Anthropic Messages API adapter (`POST {ANTHROPIC_BASE_URL}/v1/messages`, `x-api-key`,
 * `anthropic-version`). System messages become the top-level `system` field; `max_tokens` is
 * required by the API, so a default applies when the caller gives none.
 */

import { type ChatParams, type ChatProvider, ProviderError, type StreamEvent, type Usage, zeroUsage } from './provider.contract.ts';
import { createUpstreamClient, failFromBuffered, failFromStatus, parseJsonBody, parseSse } from './provider-http.client.ts';

export const ANTHROPIC_VERSION = '2023-06-01';
/** Used when the request sets no max_tokens (the Messages API requires one). */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;

export type AnthropicOptions = { baseUrl: string; apiKey: string | undefined; timeoutMs: number };

function requestBody(p: ChatParams, stream: boolean): string {
  const system = p.messages
    .filter((m) => m.role === 'system')
    .map((m) => m.content)
    .join('\n\n');
  const body: Record<string, unknown> = {
    model: p.model,
    max_tokens: p.max_tokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    messages: p.messages.filter((m) => m.role !== 'system').map((m) => ({ role: m.role, content: m.content })),
  };
  if (system) body.system = system;
  if (p.temperature !== undefined) body.temperature = Math.min(p.temperature, 1); // the API's range is 0..1
  if (p.top_p !== undefined) body.top_p = p.top_p;
  if (stream) body.stream = true;
  return JSON.stringify(body);
}

const tokens = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);
const usageOf = (input: number, output: number): Usage => ({
  prompt_tokens: input,
  completion_tokens: output,
  total_tokens: input + output,
});

export function createAnthropicProvider(options: AnthropicOptions): ChatProvider {
  const client = createUpstreamClient(options.baseUrl, { timeoutMs: options.timeoutMs });
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json',
    'anthropic-version': ANTHROPIC_VERSION,
    ...(options.apiKey ? { 'x-api-key': options.apiKey } : {}),
  };
  const streamHeaders = { ...headers, accept: 'text/event-stream' };
  const ensureConfigured = () => {
    if (!options.apiKey) throw new ProviderError('anthropic is not configured');
  };

  return {
    name: 'anthropic',
    configured: options.apiKey !== undefined,

    async chat(p) {
      ensureConfigured();
      const res = await client.sendBuffered('POST', '/v1/messages', headers, requestBody(p, false), p.signal);
      if (res.statusCode < 200 || res.statusCode >= 300) failFromBuffered(res, 'anthropic');
      const json = parseJsonBody(res.body, 'anthropic');
      if (!Array.isArray(json?.content)) throw new ProviderError('anthropic sent no content');
      const content = (json.content as { type?: string; text?: unknown }[])
        .filter((b) => b?.type === 'text' && typeof b.text === 'string')
        .map((b) => b.text as string)
        .join('');
      return {
        id: typeof json.id === 'string' ? json.id : '',
        model: typeof json.model === 'string' ? json.model : p.model,
        content,
        usage: usageOf(tokens(json.usage?.input_tokens), tokens(json.usage?.output_tokens)),
      };
    },

    async stream(p) {
      ensureConfigured();
      const res = await client.send('POST', '/v1/messages', streamHeaders, requestBody(p, true), p.signal);
      if (res.statusCode < 200 || res.statusCode >= 300) await failFromStatus(res, 'anthropic');
      return (async function* (): AsyncGenerator<StreamEvent> {
        let id = '';
        let model = p.model;
        let input = 0;
        let output = 0;
        for await (const msg of parseSse(res.body, p.signal)) {
          let ev: Record<string, any>;
          try {
            ev = JSON.parse(msg.data) as Record<string, any>;
          } catch {
            continue;
          }
          const type = ev.type ?? msg.event;
          if (type === 'message_start') {
            if (typeof ev.message?.id === 'string') id = ev.message.id;
            if (typeof ev.message?.model === 'string') model = ev.message.model;
            input = tokens(ev.message?.usage?.input_tokens);
            output = tokens(ev.message?.usage?.output_tokens);
          } else if (type === 'content_block_delta') {
            const text = ev.delta?.text;
            if (typeof text === 'string' && text.length > 0) yield { type: 'delta', text };
          } else if (type === 'message_delta') {
            if (ev.usage?.output_tokens !== undefined) output = tokens(ev.usage.output_tokens);
            if (ev.usage?.input_tokens !== undefined) input = tokens(ev.usage.input_tokens);
          } else if (type === 'error') {
            throw new ProviderError(`anthropic stream error: ${JSON.stringify(ev.error ?? {}).slice(0, 200)}`);
          } else if (type === 'message_stop') {
            break;
          }
        }
        yield { type: 'done', id, model, usage: id || input || output ? usageOf(input, output) : zeroUsage() };
      })();
    },

    close: () => client.close(),
  };
}
