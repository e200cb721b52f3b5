/** Request and response schemas of API key validation, shared by the web and backend routes (§4.3). */
import { z } from 'zod';
import { API_KEY_PREFIX } from './keys.service.ts';

/** `apiKey` must be a string starting `sk_`. */
export const validateKeyBody = z.object(
  {
    apiKey: z
      .string({ error: (issue) => (issue.input === undefined ? 'API key required' : 'API key must be a string') })
      .min(1, { error: 'API key required' })
      .refine((k) => k.startsWith(API_KEY_PREFIX), { error: `API key must start with ${API_KEY_PREFIX}` }),
  },
  { error: 'Request body must be a JSON object' },
);
export const keyProfile = z.object({
  valid: z.literal(true),
  userId: z.string(),
  email: z.string(),
  plan: z.string(),
  subscriptionStatus: z.string(),
  features: z.array(z.string()),
});
/** 401: `{valid:false, error}` for an invalid key; `{error}` alone when the caller is not authenticated. */
export const invalidKey = z.object({ valid: z.literal(false).optional(), error: z.string() }).loose();
export const VALIDATION_DESCRIPTION =
  'The §4.3 flow: the key is looked up by its first 10 characters (one indexed query), the SHA-256 of the presented key is ' +
  "compared with each candidate's in constant time, and the owner's profile is returned. `features` lists what the owner's " +
  'plan allows (every plan: agents, ai_chat, config, api_keys, workflows, bridge, a2a_messaging, messaging_tools; collective and ' +
  'above add coding_tools; network adds all_models and unlimited_agents; admins get the network list). A successful validation ' +
  'counts as a use of the key and updates its `lastUsed`. 400 when apiKey is missing or does not start with `sk_`; 401 ' +
  '`{valid:false, error:"Invalid API key"}` for an unknown or deleted key.';

/** What an API key's limits do on the agent proxy's routes (docs/payments.md "API keys"), for their OpenAPI descriptions. */
export const KEY_LIMITS_DESCRIPTION =
  'With an API key limited to some agents (`agentIds`), any other agent is 404. A key past its own rate limit is 429 ' +
  '`KEY_RATE_LIMITED` with `Retry-After` (OpenAI shape: `rate_limit_error` / `rate_limit_exceeded`); a key whose monthly budget ' +
  "is spent (its model calls' cost this UTC month plus the calls in flight) is 402 `KEY_BUDGET_EXCEEDED` (OpenAI shape: " +
  '`insufficient_quota` / `key_budget_exceeded`) with a sentence saying the budget, what was spent and where to raise it. The agent ' +
  'is told which key called (header `x-platform-key-id`), so its model calls are charged to the key (GET /api/usage `byKey`).';
