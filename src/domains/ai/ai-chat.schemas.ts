/**
 * The validators of POST /api/ai/chat: a hand-written check in front of the zod schemas, for the AI
 * proxy's hot path (docs/benchmarks.md "AI proxy"). zod copies every message and header into new
 * objects on each request; the check accepts only input the zod schema accepts and returns what zod
 * would return (unknown fields dropped, `model` and `agentId` trimmed). Anything it does not accept
 * goes to the zod schema itself, so every rejection and its 400 text is zod's, unchanged
 * (test/ai/chat-validation.test.ts compares both on generated bodies).
 */
import { LIMITS } from '../../config/limits.ts';
import { TASK_TYPES } from './plan.rules.ts';

const ROLES = new Set(['user', 'assistant', 'system']);
const TASKS: ReadonlySet<unknown> = new Set(TASK_TYPES);

/** A message zod would pass through as it is: exactly `role` then `content`, both valid. */
function plainMessage(m: unknown): boolean {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return false;
  let i = 0;
  for (const k in m) {
    if (i === 0 ? k !== 'role' : i === 1 ? k !== 'content' : true) return false;
    i++;
  }
  const { role, content } = m as { role: unknown; content: unknown };
  return i === 2 && ROLES.has(role as string) && typeof content === 'string' && content.length <= LIMITS.aiMaxMessageChars;
}

/** `s.trim()` when zod's `.trim().min(1).max(200)` accepts it, else undefined. */
function trimmed(s: unknown): string | undefined {
  if (typeof s !== 'string') return undefined;
  const t = s.trim();
  return t.length >= 1 && t.length <= 200 ? t : undefined;
}

const inRange = (v: unknown, min: number, max: number) => typeof v === 'number' && v >= min && v <= max;

/**
 * The chat body as zod's `chatBody` outputs it, or undefined when this check does not vouch for
 * it (then zod decides). Exported for its test.
 */
export function fastChatBody(data: unknown): Record<string, unknown> | undefined {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return undefined;
  const b = data as Record<string, unknown>;
  const messages = b.messages;
  if (!Array.isArray(messages) || messages.length < 1 || messages.length > LIMITS.aiMaxMessages) return undefined;
  for (let i = 0; i < messages.length; i++) if (!plainMessage(messages[i])) return undefined;
  const out: Record<string, unknown> = { messages };
  if (b.model !== undefined) {
    const model = trimmed(b.model);
    if (model === undefined) return undefined;
    out.model = model;
  }
  if (b.taskType !== undefined) {
    if (!TASKS.has(b.taskType)) return undefined;
    out.taskType = b.taskType;
  }
  if (b.temperature !== undefined) {
    if (!inRange(b.temperature, 0, 2)) return undefined;
    out.temperature = b.temperature;
  }
  if (b.top_p !== undefined) {
    if (!inRange(b.top_p, 0, 1)) return undefined;
    out.top_p = b.top_p;
  }
  if (b.max_tokens !== undefined) {
    if (!Number.isInteger(b.max_tokens) || !inRange(b.max_tokens, 1, 1_000_000)) return undefined;
    out.max_tokens = b.max_tokens;
  }
  if (b.algorithmMode !== undefined) {
    if (typeof b.algorithmMode !== 'boolean') return undefined;
    out.algorithmMode = b.algorithmMode;
  }
  if (b.stream !== undefined) {
    if (typeof b.stream !== 'boolean') return undefined;
    out.stream = b.stream;
  }
  if (b.agentId !== undefined) {
    const agentId = trimmed(b.agentId);
    if (agentId === undefined) return undefined;
    out.agentId = agentId;
  }
  return out;
}

/**
 * The documented plan headers (a loose object of optional strings) as zod outputs them: the same
 * headers. Node gives every header but set-cookie as a string, so this is the only case in practice.
 */
export function stringHeaders(names: readonly string[]) {
  return (data: unknown): unknown => {
    const h = data as Record<string, unknown>;
    for (const n of names) if (h[n] !== undefined && typeof h[n] !== 'string') return undefined;
    return data;
  };
}
