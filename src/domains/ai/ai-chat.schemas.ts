/**
 * The schemas of the AI layer's routes (§4.9, src/http/backend/routes/ai.routes.ts): the zod schema
 * of each request and answer (below), and for POST /api/ai/chat a hand-written check in front of
 * its zod schemas, for the AI proxy's hot path (docs/benchmarks.md "AI proxy"). zod copies every message and header into new
 * objects on each request; the check accepts only input the zod schema accepts and returns what zod
 * would return (unknown fields dropped, `model` and `agentId` trimmed). Anything it does not accept
 * goes to the zod schema itself, so every rejection and its 400 text is zod's, unchanged
 * (test/ai/chat-validation.test.ts compares both on generated bodies).
 */
import { z } from 'zod';
import { LIMITS } from '../../config/limits.ts';
import { SUBSCRIPTION_HEADER, TASK_TYPES } from './plan.rules.ts';
import { numberBetween, tokenLimit } from './sampling.schemas.ts';

/** What a body that is not a JSON object gets (as every route's, src/http/shared/schemas.ts `jsonBody`). */
const NOT_AN_OBJECT = { error: 'Request body must be a JSON object' };

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

/* The zod schemas of the AI layer's routes (src/http/backend/routes/ai.routes.ts): requests and answers. */

/** §5 header context of the plan middleware, read by the plan-required routes: each header and what it means. */
export const PLAN_HEADERS = {
  'x-user-plan': 'solo, collective, label or network; required (402 PLAN_REQUIRED) unless x-user-email is an admin',
  [SUBSCRIPTION_HEADER]: 'subscription id; required (402 SUBSCRIPTION_REQUIRED) unless x-user-email is an admin',
  'x-user-email': 'the acting user; an email in ADMIN_EMAILS gets network-level access',
  'x-user-id': 'the acting user (default `anonymous`)',
  'x-user-role': "the acting user's role",
};
/** What the plan-required routes' descriptions say of the plan middleware. */
export const PLAN_HEADERS_DOC =
  'Plan middleware (§4.9/§5). When `x-user-id` is a platform user, their stored plan and subscription decide (the plan headers are ' +
  "ignored: a caller cannot raise a user's plan); an active subscription is needed only where a card processor is configured, else 402 " +
  '`SUBSCRIPTION_REQUIRED`; stored admins get network. For any other caller: ' +
  `\`x-user-plan\` (solo, collective, label, network) and \`${SUBSCRIPTION_HEADER}\` are required, else 402 ` +
  '`{success:false,error,code}`; an `x-user-email` in ADMIN_EMAILS bypasses both and gets network-level access. ' +
  'Header context: `x-user-id` (default `anonymous`), `x-user-role`. Models per plan: solo 3, collective 5, label 7, network all.';

const TASK_TYPE_ERROR = `Invalid taskType: use one of ${TASK_TYPES.join(', ')}`;
const taskType = z.enum(TASK_TYPES, { error: TASK_TYPE_ERROR });

const MESSAGES_REQUIRED = 'Messages array is required';
/** POST /api/ai/chat's body (bench/ai-proxy.bench.ts measures what validating it costs; fastChatBody above vouches for the common case). */
export const chatBody = z.object(
  {
    messages: z
      .array(
        z.object(
          {
            role: z.enum(['user', 'assistant', 'system'], { error: 'Each message role must be user, assistant or system' }),
            content: z
              .string({ error: 'Each message content must be a string' })
              .max(LIMITS.aiMaxMessageChars, { error: `Each message content must be at most ${LIMITS.aiMaxMessageChars} characters` }),
          },
          { error: 'Each message must be an object with role and content' },
        ),
        { error: MESSAGES_REQUIRED },
      )
      .min(1, { error: MESSAGES_REQUIRED })
      .max(LIMITS.aiMaxMessages, { error: `At most ${LIMITS.aiMaxMessages} messages` }),
    model: z
      .string({ error: 'Model must be a string' })
      .trim()
      .min(1, { error: 'Model must not be empty' })
      .max(200, { error: 'Unknown model' })
      .optional()
      .describe('`<vendor>/<model>`; omitted: chosen from taskType. Must be allowed by the plan (403 MODEL_RESTRICTED)'),
    taskType: taskType.optional().describe('coding, analysis, creative, long or general (default)'),
    temperature: numberBetween('Temperature', 0, 2).optional(),
    top_p: numberBetween('Parameter top_p', 0, 1).optional(),
    max_tokens: tokenLimit('Parameter max_tokens').optional(),
    algorithmMode: z
      .boolean({ error: 'Parameter algorithmMode must be a boolean' })
      .optional()
      .describe('7-phase structured answers (default false)'),
    stream: z
      .boolean({ error: 'Parameter stream must be a boolean' })
      .optional()
      .describe('true: answer as Server-Sent Events (see description)'),
    agentId: z
      .string({ error: 'Parameter agentId must be a string' })
      .trim()
      .min(1, { error: 'Parameter agentId must not be empty' })
      .max(200, { error: 'Parameter agentId is too long' })
      .optional()
      .describe('added: recorded with the usage row'),
  },
  NOT_AN_OBJECT,
);

const ESTIMATE_REQUIRED = 'Model, inputTokens and outputTokens are required';
const tokenCount = z
  .number({ error: ESTIMATE_REQUIRED })
  .int({ error: 'Token counts must be non-negative integers' })
  .min(0, { error: 'Token counts must be non-negative integers' })
  .max(1_000_000_000, { error: 'Token count too large' });
export const estimateBody = z.object(
  {
    model: z.string({ error: ESTIMATE_REQUIRED }).trim().min(1, { error: ESTIMATE_REQUIRED }).max(200, { error: 'Unknown model' }),
    inputTokens: tokenCount,
    outputTokens: tokenCount,
  },
  NOT_AN_OBJECT,
);

// a POST without a body is fine (Fastify hands the validator null)
export const selectBody = z.object({ taskType: taskType.optional() }, NOT_AN_OBJECT).nullish();

const publicModel = z.object({
  id: z.string(),
  name: z.string(),
  provider: z.string(),
  description: z.string(),
  tags: z.array(z.string()),
  inputCost: z.number().describe('USD per input token'),
  outputCost: z.number().describe('USD per output token'),
  contextWindow: z.number(),
  available: z.boolean(),
});
/** GET /api/ai/health */
export const aiHealth = z.object({
  status: z.enum(['healthy', 'degraded']),
  providers: z.record(z.string(), z.boolean()),
  timestamp: z.string(),
});
export const aiHealthFailed = z.object({ status: z.literal('error'), error: z.string() });
/** GET /api/ai/models */
export const catalogQuery = z.object({
  refresh: z.enum(['true', 'false', '1', '0'], { error: 'Parameter refresh must be true or false' }).optional(),
});
export const modelCatalog = z.object({ models: z.array(publicModel), count: z.number(), router: z.boolean(), timestamp: z.string() });
/** GET /api/ai/models/:provider */
export const providerModels = z.object({ provider: z.string(), models: z.array(publicModel), count: z.number(), timestamp: z.string() });
/** POST /api/ai/models/select */
export const selectedModel = z.object({
  model: z.object({ id: z.string(), provider: z.string() }),
  taskType: z.string(),
  timestamp: z.string(),
});
const chatUsage = z.object({ prompt_tokens: z.number(), completion_tokens: z.number(), total_tokens: z.number() });
/** POST /api/ai/estimate-cost's answer. */
export const costEstimate = z.object({
  model: z.string(),
  inputTokens: z.number(),
  outputTokens: z.number(),
  estimatedCost: z.number(),
  currency: z.literal('USD'),
  timestamp: z.string(),
});
/** POST /api/ai/chat's 200 answer (bench/ai-proxy.bench.ts measures what serializing it costs). */
export const chatResponse = z.object({
  id: z.string(),
  model: z.string(),
  provider: z.string(),
  message: z.object({ role: z.literal('assistant'), content: z.string() }),
  usage: chatUsage,
  timestamp: z.string(),
});
export const planError = z
  .object({ success: z.literal(false), error: z.string(), code: z.enum(['PLAN_REQUIRED', 'SUBSCRIPTION_REQUIRED']) })
  .describe('402: `PLAN_REQUIRED` (x-user-plan missing or unrecognized) or `SUBSCRIPTION_REQUIRED`');
/** POST /api/ai/chat's 402: the plan refusals, or (AI_BILLING=balance) a platform user's balance that cannot cover the call. */
export const chatPaymentError = z
  .object({
    success: z.literal(false).optional(),
    error: z.string(),
    code: z.enum(['PLAN_REQUIRED', 'SUBSCRIPTION_REQUIRED', 'BALANCE_TOO_LOW']),
    balanceUsd: z.number().optional(),
    holdUsd: z.number().optional(),
    heldUsd: z.number().optional(),
  })
  .describe(
    '402: `PLAN_REQUIRED` (x-user-plan missing or unrecognized) or `SUBSCRIPTION_REQUIRED` (`success:false`); with AI_BILLING=balance, ' +
      "`BALANCE_TOO_LOW` when a platform user's balance cannot cover the call's hold (its prompt and max_tokens at the model's price), " +
      'with `balanceUsd`, `holdUsd` and `heldUsd` (docs/payments.md "Model calls from the balance")',
  );
export const restrictedError = z
  .object({
    success: z.literal(false).optional(),
    error: z.string(),
    code: z.string().optional(),
    allowedModels: z.array(z.string()).optional(),
  })
  .describe('403 `{success:false,error,code:"MODEL_RESTRICTED",allowedModels}`; or `{error:"Forbidden"}` for a wrong bearer key');

/**
 * chatResponse's fields, picked: the same JSON its zod serializer writes for what ai.chat returns
 * (POST /api/ai/chat's 200 serializer on the hot path, docs/benchmarks.md "AI proxy").
 */
export function chatResponseJson(r: z.infer<typeof chatResponse>): string {
  return JSON.stringify({
    id: r.id,
    model: r.model,
    provider: r.provider,
    message: { role: r.message.role, content: r.message.content },
    usage: { prompt_tokens: r.usage.prompt_tokens, completion_tokens: r.usage.completion_tokens, total_tokens: r.usage.total_tokens },
    timestamp: r.timestamp,
  });
}
