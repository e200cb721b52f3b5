/**
 * Built-in plugins of the v1 gateway (§4.8) and their prices (docs/payments.md): `agent`,
 * `generate-text`, `tts`, `stt`. Each parses its input before anything is charged, then calls a
 * real provider: the AI layer's adapters, the caller's own agent, or the configured provider's
 * OpenAI-compatible audio endpoints.
 */
import { z } from 'zod';
import { AppError, badRequest } from '../../../lib/errors.ts';
import { PLUGIN_PRICES } from '../../../lib/prices.ts';
import type { AiActor, AiService } from '../../ai/index.ts';
import type { AudioClient } from './audio.client.ts';

/** The API key a paid call came with (docs/payments.md "API keys"): its id, and the agents it may reach (null: all). */
export type PluginCallerKey = { id: string; agentIds: readonly string[] | null };

export type PluginCaller = { actor: AiActor; userId: string | null; key?: PluginCallerKey | null | undefined };

export type PluginOutput =
  | { type: 'json'; message: unknown; extra?: Record<string, unknown> }
  | { type: 'stream'; model: string; events: AsyncIterable<{ type: 'delta'; text: string } | { type: 'done'; content: string }> };

export type Plugin = {
  id: string;
  priceMicros: number;
  streaming: boolean;
  /** custom plugins only: needs an account or a verified payment (§4.8); no built-in plugin does */
  auth: boolean;
  /** validates the forwarded body (400 on bad input, before any charge) and returns the call */
  prepare(body: Record<string, unknown>): (caller: PluginCaller, o: { stream: boolean; signal: AbortSignal }) => Promise<PluginOutput>;
};

/**
 * The caller's own running agent (`agent` plugin), one the caller's key may reach; undefined when
 * they have none (a key limited to agents none of which runs: 404, agent-chat.service.ts).
 */
export type AgentChat = (
  caller: { userId: string; key: PluginCallerKey | null },
  messages: { role: string; content: string }[],
  signal: AbortSignal,
) => Promise<string | undefined>;

const message = z.object({ role: z.enum(['system', 'user', 'assistant']), content: z.string().min(1).max(32_000) });
const chatInput = z
  .object({
    messages: z.array(message).min(1).max(100).optional(),
    prompt: z.string().min(1).max(32_000).optional(),
    model: z.string().min(1).max(200).optional(),
    max_tokens: z.number().int().min(1).max(8192).optional(),
    temperature: z.number().min(0).max(2).optional(),
  })
  .refine((v) => v.messages !== undefined || v.prompt !== undefined, { message: 'messages or prompt required' });

const ttsInput = z
  .object({
    input: z.string().min(1).max(4096).optional(),
    text: z.string().min(1).max(4096).optional(),
    voice: z.string().min(1).max(64).default('alloy'),
    model: z.string().min(1).max(100).default('tts-1'),
    format: z.enum(['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm']).default('mp3'),
  })
  .refine((v) => v.input !== undefined || v.text !== undefined, { message: 'input required' });

const sttInput = z.object({
  audio: z
    .string()
    .min(1)
    .max(35_000_000)
    .regex(/^[A-Za-z0-9+/=\s]+$/, { message: 'audio must be base64' }),
  filename: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[\w.-]+$/)
    .default('audio.mp3'),
  model: z.string().min(1).max(100).default('whisper-1'),
  language: z.string().min(2).max(10).optional(),
});

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw badRequest(issue ? `${issue.path.join('.') || 'body'}: ${issue.message}` : 'Invalid input');
  }
  return r.data;
}

const toMessages = (v: z.infer<typeof chatInput>) => v.messages ?? [{ role: 'user' as const, content: v.prompt! }];
// a plugin whose provider is not configured is no plugin at all (§4.8 502 `no_plugin`); nothing is charged
const audioUnavailable = () => new AppError('NO_PLUGIN', undefined, { message: 'Audio provider not configured (OPENAI_API_KEY)' });

export function createPlugins(deps: { ai: AiService; audio: AudioClient; agentChat?: AgentChat | undefined }): Record<string, Plugin> {
  const { ai, audio } = deps;

  const textCall =
    (v: z.infer<typeof chatInput>) =>
    async (caller: PluginCaller, o: { stream: boolean; signal: AbortSignal }): Promise<PluginOutput> => {
      const input = { messages: toMessages(v), model: v.model, max_tokens: v.max_tokens, temperature: v.temperature, agentId: 'gateway' };
      if (o.stream) {
        const opened = await ai.chatStream(caller.actor, input, o.signal);
        return { type: 'stream', model: opened.model, events: opened.events };
      }
      const r = await ai.chat(caller.actor, input, o.signal);
      return { type: 'json', message: r.message.content, extra: { model: r.model, usage: r.usage } };
    };

  return {
    'generate-text': {
      id: 'generate-text',
      priceMicros: PLUGIN_PRICES['generate-text'],
      streaming: true,
      auth: false,
      prepare: (body) => textCall(parse(chatInput, body)),
    },
    agent: {
      id: 'agent',
      priceMicros: PLUGIN_PRICES.agent,
      streaming: true,
      auth: false,
      prepare(body) {
        const v = parse(chatInput, body);
        const viaAi = textCall(v);
        return async (caller, o) => {
          // the caller's own running agent answers when there is one (§4.8 "orchestrator")
          if (caller.userId && deps.agentChat) {
            const reply = await deps.agentChat({ userId: caller.userId, key: caller.key ?? null }, toMessages(v), o.signal);
            if (reply !== undefined) {
              if (!o.stream) return { type: 'json', message: reply, extra: { via: 'agent' } };
              return {
                type: 'stream',
                model: 'agent',
                events: (async function* () {
                  yield { type: 'delta' as const, text: reply };
                  yield { type: 'done' as const, content: reply };
                })(),
              };
            }
          }
          return viaAi(caller, o);
        };
      },
    },
    tts: {
      id: 'tts',
      priceMicros: PLUGIN_PRICES.tts,
      streaming: false,
      auth: false,
      prepare(body) {
        const v = parse(ttsInput, body);
        if (!audio.configured) throw audioUnavailable();
        return async (_caller, o) => {
          const r = await audio.speech({ input: v.input ?? v.text!, voice: v.voice, model: v.model, format: v.format, signal: o.signal });
          return { type: 'json', message: { audio: r.audio.toString('base64'), contentType: r.contentType, format: v.format } };
        };
      },
    },
    stt: {
      id: 'stt',
      priceMicros: PLUGIN_PRICES.stt,
      streaming: false,
      auth: false,
      prepare(body) {
        const v = parse(sttInput, body);
        const bytes = Buffer.from(v.audio, 'base64');
        if (bytes.length === 0) throw badRequest('audio: empty');
        if (!audio.configured) throw audioUnavailable();
        return async (_caller, o) => {
          const r = await audio.transcribe({ audio: bytes, filename: v.filename, model: v.model, language: v.language, signal: o.signal });
          return { type: 'json', message: r.text };
        };
      },
    },
  };
}
