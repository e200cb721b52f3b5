/**
 * The catalogue of every error the platform raises (issue "one error vocabulary"; docs/architecture.md
 * "Errors"). A service throws `new AppError(<code>, message?, extra?)`: the code is typed (a key of
 * this object), its HTTP status comes from here, and so does what a client can see of it. Two kinds
 * of public identifier exist because the specification shows both, and bodies must stay as it fixes them:
 * - `body`: the value of a `code` field next to the message (`{error, code}`, e.g. `ADMIN_REQUIRED`);
 * - `error`: a fixed `error` text that is itself the identifier, the explanation going in `message`
 *   (the v1 gateway and wallet balances, §4.4 and §4.8: `{error: 'session_invalid', message}`).
 * Other errors answer `{error}` alone; their code still names them in logs and in the OpenAPI
 * description (`x-error-codes`).
 *
 * To add an error: add an entry here (status, summary; `body` or `error` only if the specification
 * shows clients an identifier), then throw it by name.
 */
export type ErrorDefinition = {
  readonly status: number;
  readonly summary: string;
  readonly body?: string;
  readonly error?: string;
};

export const ERROR_CODES = {
  // generic, behind the helpers of errors.ts
  BAD_REQUEST: { status: 400, summary: 'The request is invalid (the message says which field and why)' },
  UNAUTHORIZED: { status: 401, summary: 'No valid session, key or secret' },
  FORBIDDEN: { status: 403, summary: 'Authenticated, but not allowed' },
  NOT_FOUND: { status: 404, summary: 'No such resource (or not yours)' },
  CONFLICT: { status: 409, summary: 'The resource exists or is in a state that refuses this' },
  TOO_MANY_REQUESTS: { status: 429, summary: 'Rate limited; see Retry-After' },
  SERVICE_UNAVAILABLE: { status: 503, summary: 'A dependency or integration is not available' },
  CLIENT_CLOSED: { status: 499, summary: 'The client went away before the answer (never sent)' },

  // written by the error handler for what no service raised (src/http/shared/error-handler.ts)
  METHOD_NOT_ALLOWED: { status: 405, summary: 'The path exists but not with this method; Allow lists those it serves' },
  PAYLOAD_TOO_LARGE: { status: 413, summary: 'The request body is over the size limit' },
  REQUEST_REJECTED: { status: 400, summary: 'The framework refused the request before any route ran (its 4xx is passed on)' },
  UNEXPECTED: { status: 500, summary: 'An unexpected failure; the detail is in the log under the request id' },

  // configuration and integrations (§7 "not configured")
  SERVER_MISCONFIGURED: { status: 500, summary: 'A required server setting is missing' },
  BRIDGE_NOT_CONFIGURED: { status: 503, summary: 'BRIDGE_SECRET is not set: the bridge is closed' },
  HOSTING_WEBHOOK_NOT_CONFIGURED: { status: 503, summary: 'HOSTING_WEBHOOK_SECRET is not set: the webhook is closed' },
  PASSWORD_RESET_NOT_CONFIGURED: { status: 503, summary: 'SMTP_URL is not set: password reset by email is off' },
  DEMO_UNAVAILABLE: { status: 503, summary: 'The demo chat has no model provider configured' },
  DEMO_FAILED: { status: 500, summary: 'The demo chat provider failed' },
  BALANCE_LOOKUP_NOT_CONFIGURED: { status: 500, summary: 'Stablecoin balance lookup is not wired in this process' },
  RPC_NOT_CONFIGURED: { status: 500, summary: 'No chain RPC is configured (TEMPO_RPC_URL)', body: 'RPC_NOT_CONFIGURED' },
  RPC_FAILED: { status: 500, summary: 'The chain RPC failed', body: 'RPC_FAILED' },
  CDP_NOT_CONFIGURED: { status: 500, summary: 'Custodial wallets are not configured (CDP_*)', body: 'CDP_NOT_CONFIGURED' },
  CDP_FAILED: { status: 500, summary: 'The custodial wallet provider failed', body: 'CDP_FAILED' },

  // accounts and admin (§4.1, docs/admin.md)
  ADMIN_REQUIRED: { status: 403, summary: 'Only admins may do this', body: 'ADMIN_REQUIRED' },
  SETUP_LINK_INVALID: { status: 404, summary: 'The one-time admin setup link is invalid, expired or used', body: 'SETUP_LINK_INVALID' },
  CANNOT_REVOKE_SELF: { status: 400, summary: 'An admin cannot revoke their own admin right', body: 'CANNOT_REVOKE_SELF' },
  IDEMPOTENCY_KEY_REUSED: {
    status: 409,
    summary: 'The Idempotency-Key was already used for a different request (another user, amount or note)',
    body: 'IDEMPOTENCY_KEY_REUSED',
  },

  // agents (§4.7, §7)
  PLAN_REQUIRED: {
    status: 402,
    summary: 'The plan does not allow this (tier, or a missing plan header on /api/ai)',
    body: 'PLAN_REQUIRED',
  },
  SUBSCRIPTION_REQUIRED: { status: 402, summary: 'An active subscription is required', body: 'SUBSCRIPTION_REQUIRED' },
  AGENT_LIMIT_REACHED: {
    status: 402,
    summary: "The plan's agent limit is reached (429 on the web app, §4.7)",
    body: 'AGENT_LIMIT_REACHED',
  },
  PROVISIONING_FAILED: { status: 500, summary: 'The backend could not provision the agent', body: 'PROVISIONING_FAILED' },
  BACKEND_UNAVAILABLE: { status: 500, summary: 'The web app could not reach the backend', body: 'BACKEND_UNAVAILABLE' },
  BACKEND_ERROR: { status: 500, summary: 'The backend refused; its status and code are passed on' },
  HOSTING_UNAVAILABLE: { status: 500, summary: 'The hosting driver failed', body: 'HOSTING_UNAVAILABLE' },
  AGENT_NOT_RUNNING: { status: 409, summary: 'The agent must be running for this', body: 'AGENT_NOT_RUNNING' },
  AGENT_UNAVAILABLE: { status: 502, summary: 'The agent failed or could not be reached', body: 'AGENT_UNAVAILABLE' },
  AGENT_TIMEOUT: { status: 500, summary: 'The agent did not reply in time', body: 'AGENT_TIMEOUT' },
  CHANNEL_TOKEN_REFUSED: { status: 400, summary: 'The messaging provider refused the bot token', body: 'CHANNEL_TOKEN_REFUSED' },
  CHANNEL_PROVIDER_UNREACHABLE: {
    status: 502,
    summary: 'The messaging provider could not be reached',
    body: 'CHANNEL_PROVIDER_UNREACHABLE',
  },
  AGENT_ERROR: { status: 500, summary: 'The agent answered with an error', body: 'AGENT_ERROR' },
  AGENT_REDIRECT_REFUSED: {
    status: 502,
    summary:
      'Through the gateway proxy, the agent answered a redirect to a place outside its own paths (another site), which the platform does not pass on',
  },
  NO_GATEWAY_TOKEN: { status: 503, summary: 'The agent has no gateway token yet', body: 'NO_GATEWAY_TOKEN' },
  AGENT_SANDBOX_NOT_CONFIGURED: {
    status: 503,
    summary:
      'The local driver has no working agent sandbox (bubblewrap) and AGENT_SANDBOX=off is not set: it starts no agent (docs/agents.md "Sandbox")',
    body: 'AGENT_SANDBOX_NOT_CONFIGURED',
  },

  // files (§4.17)
  NO_WORKSPACE: { status: 404, summary: 'The agent has no workspace on this machine yet', body: 'NO_WORKSPACE' },
  NO_LOCAL_WORKSPACE: { status: 409, summary: "The agent's workspace is not on this machine", body: 'NO_LOCAL_WORKSPACE' },
  NOT_A_REPOSITORY: { status: 500, summary: 'The workspace is not a git repository', body: 'NOT_A_REPOSITORY' },
  GIT_FAILED: { status: 500, summary: 'A git command failed', body: 'GIT_FAILED' },
  GIT_UNAVAILABLE: {
    status: 503,
    summary: "git needs the agent sandbox (bubblewrap): it never runs with the platform's rights in an agent's workspace",
    body: 'GIT_UNAVAILABLE',
  },

  // AI layer (§4.9)
  AI_RATE_LIMITED: { status: 429, summary: 'AI_RATE_LIMIT requests per minute per IP exceeded' },
  AI_USAGE_STORE_UNAVAILABLE: { status: 503, summary: 'The usage store (PostgreSQL) is unavailable' },
  AI_PROVIDER_ERROR: { status: 500, summary: 'The AI provider request failed', body: 'AI_PROVIDER_ERROR' },
  MODEL_RESTRICTED: { status: 403, summary: 'The model is not available on this plan', body: 'MODEL_RESTRICTED' },
  PROVIDER_UNAVAILABLE: { status: 503, summary: 'No configured provider can serve this model', body: 'PROVIDER_UNAVAILABLE' },
  QUOTA_EXCEEDED: { status: 429, summary: 'The monthly token quota is used up', body: 'QUOTA_EXCEEDED' },
  AGENT_BUDGET_EXCEEDED: { status: 429, summary: "The agent's monthly budget (USD) is used up", body: 'AGENT_BUDGET_EXCEEDED' },
  BALANCE_TOO_LOW: {
    status: 402,
    summary: "AI_BILLING=balance: the owner's balance cannot cover the call's hold (its prompt and max_tokens at the model's price)",
    body: 'BALANCE_TOO_LOW',
  },
  MODEL_CANNOT_RUN: {
    status: 400,
    summary:
      "The model asked for an agent is not one the owner's plan allows and a configured provider serves (`models` lists those that are)",
    body: 'MODEL_CANNOT_RUN',
  },
  KEY_BUDGET_EXCEEDED: {
    status: 402,
    summary: 'The API key\'s monthly budget (USD) is used up (docs/payments.md "API keys")',
    body: 'KEY_BUDGET_EXCEEDED',
  },
  KEY_RATE_LIMITED: { status: 429, summary: "The API key's requests per minute are used up; see Retry-After", body: 'KEY_RATE_LIMITED' },
  MODEL_UNPRICED: {
    status: 403,
    summary: 'AI_BILLING=balance: the model has no price (the operator sets one in MODEL_PRICES or on the admin page)',
    body: 'MODEL_UNPRICED',
  },

  // trading (§4.5)
  TRADING_KEY_REQUIRED: { status: 503, summary: 'No trading key: the user must add one' },
  TRADING_NOT_CONFIGURED: { status: 503, summary: 'TRADING_API_URL is not set' },
  TRADING_TIMEOUT: { status: 503, summary: 'The trading service timed out' },
  TRADING_UNREACHABLE: { status: 503, summary: 'The trading service could not be reached' },
  TRADING_ERROR: { status: 500, summary: 'The trading service answered with an error' },
  TRADING_INVALID_RESPONSE: { status: 500, summary: 'The trading service answered something unreadable' },

  // calendar (§4.6): 401 covers "not connected" as the specification says
  CALENDAR_NOT_CONFIGURED: { status: 503, summary: 'Calendar connections are not configured (CALENDAR_CLIENT_ID, CALENDAR_CLIENT_SECRET)' },
  CALENDAR_NOT_CONNECTED: { status: 401, summary: 'The user has no calendar connection (or the provider revoked it)' },
  CALENDAR_UPSTREAM_FAILED: { status: 502, summary: 'The calendar provider failed, timed out or answered something unreadable' },

  // x402 gateway (§4.11)
  X402_NOT_CONFIGURED: { status: 503, summary: 'X402_GATEWAY_URL is not set' },
  X402_GATEWAY_UNREACHABLE: { status: 503, summary: 'GET /api/x402: the x402 gateway failed its health check or did not answer' },
  X402_GATEWAY_ERROR: { status: 500, summary: 'The x402 gateway failed, timed out or answered an error or something unreadable' },
  X402_COLONY_JOIN_FAILED: { status: 502, summary: 'The x402 gateway refused the colony join (its 402 is passed on as 402)' },
  X402_COLONY_UNREACHABLE: { status: 503, summary: 'The x402 gateway did not answer the colony join within 10 s' },
  X402_PAYMENT_FAILED: { status: 502, summary: 'The x402 gateway asked for an x402 payment the platform could not make' },

  // card processor (§2, §4.4)
  PROCESSOR_NOT_CONFIGURED: {
    status: 500,
    summary: 'Card payments are not configured (STRIPE_SECRET_KEY)',
    body: 'PROCESSOR_NOT_CONFIGURED',
  },
  CHECKOUT_FAILED: { status: 500, summary: 'The card processor could not create the checkout', body: 'CHECKOUT_FAILED' },

  // payments (§4.4, §4.8): the specification names these in `error`, the explanation is in `message`
  INSUFFICIENT_BALANCE: { status: 402, summary: 'Not enough balance (wallet or payment session)', error: 'insufficient_balance' },
  PAYMENT_REQUIRED: {
    status: 402,
    summary: 'Pay first: the body carries the MPP challenge and a card checkout',
    error: 'payment_required',
  },
  SESSION_REQUIRED: { status: 402, summary: 'Session billing without X-Session-Id and X-Wallet-Address', error: 'session_required' },
  SESSION_INVALID: { status: 402, summary: 'Unknown, closed or expired payment session, or another wallet', error: 'session_invalid' },
  VOUCHER_FAILED: {
    status: 402,
    summary: 'The session voucher could not be signed or recorded; nothing was charged',
    error: 'voucher_failed',
  },
  UNKNOWN_PLUGIN: { status: 400, summary: 'Session billing asked for a plugin that has no price', error: 'unknown_plugin' },
  NO_PLUGIN: { status: 502, summary: 'No such plugin, or its provider is not configured; nothing was charged', error: 'no_plugin' },
  PLUGIN_FAILED: { status: 500, summary: 'The plugin failed before answering; nothing was charged', error: 'internal' },
} as const satisfies Record<string, ErrorDefinition>;

export type ErrorCode = keyof typeof ERROR_CODES;

type Entry = readonly [ErrorCode, ErrorDefinition];
const ENTRIES = Object.entries(ERROR_CODES) as unknown as Entry[];
const sortedValues = (pick: (d: ErrorDefinition) => string | undefined) =>
  ENTRIES.flatMap(([, d]) => {
    const v = pick(d);
    return v === undefined ? [] : [v];
  }).sort();

/** The `code` values a client can see in error bodies (the OpenAPI error schema lists them). */
export const BODY_CODES: readonly string[] = sortedValues((d) => d.body);

/** The fixed `error` texts that are identifiers themselves (the OpenAPI error schema lists them). */
export const ERROR_TEXT_CODES: readonly string[] = sortedValues((d) => d.error);

/** The codes whose `error` text is fixed by the catalogue (gateway refusals, wallet balance). */
export type FixedTextCode = { [K in ErrorCode]: (typeof ERROR_CODES)[K] extends { error: string } ? K : never }[ErrorCode];

/** Codes whose message a call site words itself (all but the fixed-text ones). */
export type WordedCode = Exclude<ErrorCode, FixedTextCode>;

/** The catalogue as the OpenAPI descriptions carry it (`x-error-codes`). */
export const errorCatalogue = () =>
  Object.fromEntries(
    ENTRIES.map(([code, d]) => [
      code,
      { status: d.status, summary: d.summary, ...(d.body ? { body: d.body } : {}), ...(d.error ? { error: d.error } : {}) },
    ]),
  );

/**
 * The catalogue entry whose body code is `body` (codes passed on from the backend). An entry has a
 * `body` or a fixed `error` text, never both (tested), so the result is always a worded code.
 */
export const codeForBody = (body: string | undefined): WordedCode | undefined =>
  body === undefined ? undefined : (ENTRIES.find(([, d]) => d.body === body)?.[0] as WordedCode | undefined);
