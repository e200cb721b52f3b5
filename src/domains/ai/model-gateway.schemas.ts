/**
 * The schemas of the model gateway agents call (src/http/backend/routes/model-gateway.routes.ts):
 * the zod schemas of its requests and answers (below), and for POST
 * /api/agent-gateway/v1/chat/completions the body check and the answer's serializer. The body: a hand-written check in front of the zod schema, for the hot path (docs/benchmarks.md "AI proxy"),
 * as ai-chat.schemas.ts does for POST /api/ai/chat. It vouches only for the common body (text
 * messages, model, sampling and token fields, stream, user) and returns exactly what zod would
 * (unknown fields dropped, `model` trimmed, fields in the schema's order, each message as it came);
 * any other body, and every rejection, is zod's. The 200 answer: the JSON value the zod serializer
 * writes, without its validating copy of every choice; anything that does not match goes to zod
 * (test/ai/gateway-validation.test.ts compares both ways with zod).
 */
import { z } from 'zod';
import { MODEL_GATEWAY_PATH } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import { AUTO_MODEL } from './model-choice.service.ts';
import { numberBetween, tokenLimit } from './sampling.schemas.ts';

const ROLES: ReadonlySet<unknown> = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

/** A message zod's loose message object passes on unchanged: `role` first, then `content` (text or null) if any. */
function plainMessage(m: unknown): boolean {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return false;
  let i = 0;
  let hasContent = false;
  for (const k in m) {
    if (i === 0 && k !== 'role') return false;
    if (k === 'content') {
      if (i !== 1) return false;
      hasContent = true;
    }
    i++;
  }
  const { role, content } = m as { role: unknown; content: unknown };
  if (!ROLES.has(role)) return false;
  return !hasContent || content === null || (typeof content === 'string' && content.length <= LIMITS.aiMaxMessageChars);
}

const num = (min: number, max: number) => (v: unknown) => v === null || (typeof v === 'number' && v >= min && v <= max);
const tokens = (v: unknown) => v === null || (Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 1_000_000);

/** The fields this check decides (others of the schema go to zod), each with its test. */
const CHECKS: Record<string, (v: unknown) => boolean> = {
  model: (v) => typeof v === 'string' && v.trim().length >= 1 && v.trim().length <= 200,
  messages: (v) => {
    if (!Array.isArray(v) || v.length < 1 || v.length > LIMITS.aiMaxMessages) return false;
    for (let i = 0; i < v.length; i++) if (!plainMessage(v[i])) return false;
    return true;
  },
  stream: (v) => v === null || typeof v === 'boolean',
  temperature: num(0, 2),
  top_p: num(0, 1),
  max_tokens: tokens,
  max_completion_tokens: tokens,
  user: (v) => v === null || (typeof v === 'string' && v.length <= 256),
};

/**
 * The body as the schema with these `fields` (its keys, in order) outputs it, or undefined when
 * this check does not vouch for it (then zod decides). Exported for its test.
 */
export function fastCompletionBody(fields: readonly string[], data: unknown): Record<string, unknown> | undefined {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return undefined;
  const b = data as Record<string, unknown>;
  if (!Array.isArray(b.messages)) return undefined; // required; zod words the error
  const out: Record<string, unknown> = {};
  for (const k of fields) {
    const v = b[k];
    if (v === undefined) continue;
    const check = CHECKS[k];
    if (!check?.(v)) return undefined;
    out[k] = k === 'model' ? (v as string).trim() : v;
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const optional = (v: unknown, ok: (x: unknown) => boolean) => v === undefined || ok(v);
const str = (v: unknown) => typeof v === 'string';
// zod's z.number() refuses NaN and the infinities
const isNum = (v: unknown) => typeof v === 'number' && Number.isFinite(v);
const strOrNull = (v: unknown) => v === null || typeof v === 'string';

/** Whether the `completion` schema accepts a provider's choice (a loose object: every key of it is kept). */
function choiceOk(c: unknown): boolean {
  if (!isObject(c) || !optional(c.index, isNum) || !optional(c.finish_reason, strOrNull)) return false;
  const m = c.message;
  return m === undefined || (isObject(m) && optional(m.role, str) && optional(m.content, strOrNull));
}

export type Completion = {
  id: unknown;
  object: unknown;
  created: unknown;
  model: unknown;
  provider: unknown;
  choices: unknown;
  usage: { prompt_tokens: unknown; completion_tokens: unknown; total_tokens: unknown };
  system_fingerprint?: unknown;
};

/**
 * The JSON value the `completion` response schema's zod serializer writes for `r` (the keys of a
 * choice in the provider's order), or undefined when that serializer must decide (it refuses what
 * does not match, a 500). Without zod's validating copy of every choice on the hot path. Exported
 * for its test.
 */
export function fastCompletionJson(r: Completion): string | undefined {
  const u = r.usage;
  if (
    !str(r.id) ||
    r.object !== 'chat.completion' ||
    !isNum(r.created) ||
    !str(r.model) ||
    !str(r.provider) ||
    !Array.isArray(r.choices) ||
    !isObject(u) ||
    !isNum(u.prompt_tokens) ||
    !isNum(u.completion_tokens) ||
    !isNum(u.total_tokens) ||
    !optional(r.system_fingerprint, str)
  )
    return undefined;
  for (const c of r.choices) if (!choiceOk(c)) return undefined;
  return JSON.stringify({
    id: r.id,
    object: r.object,
    created: r.created,
    model: r.model,
    provider: r.provider,
    // each choice as the provider wrote it, its keys in its order (zod's serializer puts the schema's
    // keys first): the same JSON value without a copy of every choice and message (round 7)
    choices: r.choices,
    usage: { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.total_tokens },
    system_fingerprint: r.system_fingerprint,
  });
}

/* The zod schemas: the request's allow-list, the answer, and the model list. */

const MESSAGES_REQUIRED = 'messages must be a non-empty array';

/**
 * An OpenAI chat-completions request. What is passed on to the provider is this allow-list:
 * fields a provider would bill or route by outside the plan (a router's `models` fallback list,
 * `provider`, `plugins`) are dropped, like anything else not listed. (test/ai/gateway-validation.test.ts
 * compares it with the fast check above.)
 */
export const completionBody = z.object(
  {
    model: z
      .string({ error: 'model must be a string' })
      .trim()
      .min(1, { error: 'model must not be empty' })
      .max(200, { error: 'model is too long' })
      .optional()
      .describe(`a model of the owner's plan (GET ${MODEL_GATEWAY_PATH}/models), or \`${AUTO_MODEL}\`/omitted for the plan's pick`),
    messages: z
      .array(
        z.looseObject(
          {
            role: z.enum(['system', 'developer', 'user', 'assistant', 'tool'], {
              error: 'each message role must be system, developer, user, assistant or tool',
            }),
            content: z
              .union(
                [
                  z
                    .string()
                    .max(LIMITS.aiMaxMessageChars, { error: `message content must be at most ${LIMITS.aiMaxMessageChars} characters` }),
                  z.array(z.looseObject({ type: z.string() })).max(100),
                  z.null(),
                ],
                { error: 'message content must be a string, an array of content parts or null' },
              )
              .optional(),
          },
          { error: 'each message must be an object with a role' },
        ),
        { error: MESSAGES_REQUIRED },
      )
      .min(1, { error: MESSAGES_REQUIRED })
      .max(LIMITS.aiMaxMessages, { error: `at most ${LIMITS.aiMaxMessages} messages` })
      .describe('as OpenAI takes them: tool calls, tool results and content parts are passed on as they are'),
    stream: z.boolean({ error: 'stream must be a boolean' }).nullish().describe('true: Server-Sent Events, ending with `data: [DONE]`'),
    stream_options: z
      .object({ include_usage: z.boolean({ error: 'stream_options.include_usage must be a boolean' }).nullish() })
      .nullish()
      .describe('include_usage: a last chunk with `usage` and no choices'),
    temperature: numberBetween('temperature', 0, 2).nullish(),
    top_p: numberBetween('top_p', 0, 1).nullish(),
    max_tokens: tokenLimit('max_tokens').nullish(),
    max_completion_tokens: tokenLimit('max_completion_tokens').nullish(),
    stop: z
      .union([z.string().max(1000), z.array(z.string().max(1000)).max(4)], { error: 'stop must be a string or up to 4 strings' })
      .nullish(),
    presence_penalty: numberBetween('presence_penalty', -2, 2).nullish(),
    frequency_penalty: numberBetween('frequency_penalty', -2, 2).nullish(),
    seed: z.number({ error: 'seed must be an integer' }).int({ error: 'seed must be an integer' }).nullish(),
    tools: z
      .array(z.looseObject({ type: z.string() }), { error: 'tools must be an array of tool objects' })
      .max(128)
      .nullish(),
    tool_choice: z
      .union([z.enum(['none', 'auto', 'required']), z.looseObject({ type: z.string() })], { error: 'invalid tool_choice' })
      .nullish(),
    parallel_tool_calls: z.boolean({ error: 'parallel_tool_calls must be a boolean' }).nullish(),
    response_format: z.looseObject({ type: z.string() }, { error: 'response_format must be an object with a type' }).nullish(),
    reasoning_effort: z
      .enum(['minimal', 'low', 'medium', 'high'], { error: 'reasoning_effort must be minimal, low, medium or high' })
      .nullish(),
    logprobs: z.boolean({ error: 'logprobs must be a boolean' }).nullish(),
    top_logprobs: z.number().int().min(0).max(20).nullish(),
    user: z.string().max(256).nullish(),
  },
  { error: 'Request body must be a JSON object' },
);

const completionUsage = z.object({ prompt_tokens: z.number(), completion_tokens: z.number(), total_tokens: z.number() });
/** The 200 answer (test/ai/gateway-validation.test.ts compares its serializer with fastCompletionJson). */
export const completion = z.object({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.number(),
  model: z.string().describe('the model that served (after any fallback)'),
  provider: z.string(),
  // the provider's choices as they came (tool calls, refusals, logprobs): nothing is dropped
  choices: z.array(
    z.looseObject({
      index: z.number().optional(),
      message: z.looseObject({ role: z.string().optional(), content: z.string().nullable().optional() }).optional(),
      finish_reason: z.string().nullable().optional(),
    }),
  ),
  usage: completionUsage,
  system_fingerprint: z.string().optional(),
});
/** GET …/models: OpenAI's model list. */
export const modelList = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      id: z.string(),
      object: z.literal('model'),
      created: z.number(),
      owned_by: z.string(),
      name: z.string(),
      context_length: z.number(),
    }),
  ),
});
