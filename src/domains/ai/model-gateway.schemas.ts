/**
 * The body check and the answer's serializer of the agents' AI gateway (POST
 * /api/agent-gateway/v1/chat/completions). The body: a hand-written check in front of the zod schema, for the hot path (docs/benchmarks.md "AI proxy"),
 * as ai-chat.schemas.ts does for POST /api/ai/chat. It vouches only for the common body (text
 * messages, model, sampling and token fields, stream, user) and returns exactly what zod would
 * (unknown fields dropped, `model` trimmed, fields in the schema's order, each message as it came);
 * any other body, and every rejection, is zod's. The 200 answer: the JSON value the zod serializer
 * writes, without its validating copy of every choice; anything that does not match goes to zod
 * (test/ai/gateway-validation.test.ts compares both ways with zod).
 */
import { LIMITS } from '../../config/limits.ts';

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
