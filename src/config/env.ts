/**
 * The one place that reads the environment (docs/configuration.md documents every name).
 * `loadConfig` parses once into a typed object that is passed explicitly to everything else;
 * nothing else in the code base reads `process.env`.
 * The one zod schema of every setting stays in this file (one place to read them all); the kinds of
 * value they take are env-fields.ts.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { parseEnv } from 'node:util';
import { z } from 'zod';
import { bool, list, optionalPositiveInt, optionalString, optionalUrl, port, positiveInt, trustProxy, url } from './env-fields.ts';
import { LIMITS } from './limits.ts';

/** Raw schema: one entry per variable of docs/configuration.md (settings beyond the specification's are marked "added" there). */
const envSchema = z.object({
  // Process and storage
  HOST: z.string().default('127.0.0.1'),
  WEB_PORT: port(3000),
  BACKEND_PORT: port(3001),
  PUBLIC_URL: optionalUrl,
  BACKEND_URL: optionalUrl,
  DATA_DIR: z.string().default('./data'),
  /** added: the built dashboard (dashboard/dist of this checkout by default; docs/dashboard.md) */
  DASHBOARD_DIR: optionalString,
  DATABASE_URL: optionalString,
  /** added: a login role that is only a member of platform_app, for request transactions (docs/security.md "Database roles") */
  DATABASE_REQUEST_URL: optionalString,
  DATABASE_POOL_SIZE: positiveInt(10),
  REDIS_URL: optionalString,
  /** added: bound of one Redis command in ms; a slower or unreachable Redis falls back (rate limits per process) */
  REDIS_TIMEOUT_MS: positiveInt(500),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** added: `auto` (readable lines when stdout is a terminal, JSON otherwise), `json` or `pretty` */
  LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  /** added: GET /metrics on both apps (Prometheus text) answers only `Authorization: Bearer <this>`; unset: /metrics is 404 */
  METRICS_TOKEN: optionalString,
  TRUST_PROXY: trustProxy,
  /** added: which app(s) this process serves; `npm start -- web|backend` sets it too. */
  APP: z.enum(['all', 'web', 'backend']).default('all'),
  /** added: maximum request body size in bytes. */
  BODY_LIMIT: positiveInt(1_048_576),

  // Secrets and access
  INTERNAL_API_KEY: optionalString,
  ADMIN_EMAILS: list,
  /** added: ADMIN_EMAILS matches only accounts whose email is verified (docs/admin.md); false for closed test deployments */
  ADMIN_EMAILS_REQUIRE_VERIFIED: bool(true),
  /** added: the plan every user has when no card processor is configured (subscriptions are then not required) */
  DEFAULT_PLAN: z.enum(['solo', 'collective', 'label', 'network']).default('solo'),
  WALLET_ENCRYPTION_KEY: optionalString,
  SECRETS_ENCRYPTION_KEY: optionalString,
  BRIDGE_SECRET: optionalString,
  HOSTING_WEBHOOK_SECRET: optionalString,
  TURNSTILE_SECRET_KEY: optionalString,
  TURNSTILE_VERIFY_URL: url('https://challenges.cloudflare.com/turnstile/v0/siteverify'),
  REGISTER_RATE_LIMIT: positiveInt(5),
  AI_RATE_LIMIT: positiveInt(30),
  DEMO_RATE_LIMIT: positiveInt(20),
  /** added (docs/security.md): failed sign-ins per account from one IP per LOGIN_FAILURE_WINDOW_MS */
  LOGIN_FAILURE_LIMIT: positiveInt(5),
  /** added: failed sign-ins per IP, any account, per window */
  LOGIN_IP_FAILURE_LIMIT: positiveInt(50),
  /** added: failed sign-ins per account from all IPs per window (IPs with a live session of the account are exempt) */
  LOGIN_ACCOUNT_FAILURE_LIMIT: positiveInt(100),
  /** added (docs/security.md "Slow clients"): both apps: the whole request (headers and body) must arrive within this, ms; else 408 and closed */
  HTTP_REQUEST_TIMEOUT_MS: positiveInt(30_000),
  /** added: the request headers must arrive within this, ms (capped at HTTP_REQUEST_TIMEOUT_MS) */
  HTTP_HEADERS_TIMEOUT_MS: positiveInt(15_000),
  /** added: an idle keep-alive connection is closed after this, ms (above common load-balancer idle timeouts of 60 s) */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: positiveInt(72_000),
  /** added (docs/security.md): origins besides PUBLIC_URL's allowed to send cookie-authenticated state-changing requests (e.g. a dashboard dev server) */
  CSRF_ALLOWED_ORIGINS: list.pipe(z.array(z.url({ error: 'must be a comma list of origins (URLs)' }))),
  /** added (docs/security.md): SIWE nonces per IP per minute from /api/auth/nonce */
  NONCE_RATE_LIMIT: positiveInt(60),
  /** added: how often the web app purges spent SIWE nonces past their expiry, ms */
  NONCE_PURGE_INTERVAL_MS: positiveInt(10 * 60 * 1000),
  /** added: window of the failed sign-in counters, ms (15 minutes): the longest a lockout lasts */
  LOGIN_FAILURE_WINDOW_MS: positiveInt(15 * 60 * 1000),
  /** added: how long a verified API key is trusted without a database read, ms (0: never); deleting a key evicts it at once (docs/configuration.md) */
  /** added: how often a live-log stream reads new lines of its agent, ms (docs/agents.md "Live logs") */
  LIVE_LOGS_INTERVAL_MS: positiveInt(1000),
  API_KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(5000),

  // Identity
  IDP_CLIENT_ID: list,
  IDP_CLIENT_SECRET: optionalString,
  IDP_ISSUER: url('https://accounts.google.com'),
  IDP_RISC_CONFIG_URL: optionalUrl,
  CODEHOST_CLIENT_ID: optionalString,
  CODEHOST_CLIENT_SECRET: optionalString,
  CODEHOST_URL: url('https://github.com'),
  CODEHOST_API_URL: url('https://api.github.com'),
  SIWE_CHAIN_ID: positiveInt(8453),
  SIWE_RPC_URL: url('https://mainnet.base.org'),
  WALLET_EMAIL_DOMAIN: z.string().min(1).default('wallet.local'),
  /** added (docs/configuration.md "Email"): the SMTP server password reset mails go through, `smtp://user:pass@host:587` or `smtps://…:465`; unset: no reset by email */
  SMTP_URL: optionalString.refine((v) => v === undefined || /^smtps?:\/\/\S+$/.test(v), { error: 'must be an smtp:// or smtps:// URL' }),
  /** added: the From of those mails, `Name <address>` or an address; default `Agent platform <no-reply@<PUBLIC_URL host>>` */
  MAIL_FROM: optionalString,
  /** added: password reset requests per IP per hour */
  PASSWORD_RESET_RATE_LIMIT: positiveInt(10),
  /** added: password reset requests per email address and caller IP per hour (whether or not it has an account) */
  PASSWORD_RESET_EMAIL_RATE_LIMIT: positiveInt(3),

  // Agents and hosting
  HOSTING_DRIVER: z.enum(['local', 'render', 'docker', 'kubernetes']).default('local'),
  HOSTING_API_URL: url('https://api.render.com/v1'),
  HOSTING_API_KEY: optionalString,
  HOSTING_OWNER_ID: optionalString,
  AGENTS_DOMAIN: z.string().min(1).default('agents.localhost'),
  AGENT_IMAGE: z.string().min(1).default('ghcr.io/openclaw/openclaw:latest'),
  /** added: kubernetes driver: the cluster's kubeconfig file (unset: the in-cluster service account, then ~/.kube/config) */
  KUBECONFIG: optionalString,
  /** added: kubernetes driver: the namespace every agent's objects live in */
  KUBERNETES_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, { error: 'must be a Kubernetes namespace name (DNS label)' })
    .default('agents'),
  /** added: kubernetes driver: the API server as a pod sees it (Kubernetes sets both in every container); with no KUBECONFIG, the pod's service account is used */
  KUBERNETES_SERVICE_HOST: optionalString,
  KUBERNETES_SERVICE_PORT: optionalString,
  /** added: docker driver: the Engine API (unix:///var/run/docker.sock, tcp://host:2375, http://host:2375) */
  DOCKER_HOST: z.string().min(1).default('unix:///var/run/docker.sock'),
  AGENT_RUNTIME: z.enum(['builtin', 'openclaw']).default('builtin'),
  // agents-ops: the local driver's sandbox (docs/agents.md "Sandbox")
  AGENT_SANDBOX: z.enum(['auto', 'bwrap', 'off']).default('auto'),
  /**
   * added (docs/agents.md "Agent uids"): local driver as root: the first OS uid of this platform's agents, which
   * run as the next LIMITS.agentUidRange uids. Each platform on one host needs its own range, or their
   * tenants' agents share uids and per-uid kernel limits; below 2^31 (some tools read larger uids as negative)
   */
  AGENT_UID_BASE: z.coerce
    .number({ error: 'must be a whole number' })
    .int({ error: 'must be a whole number' })
    .min(LIMITS.agentUidBaseMin, { error: `must be at least ${LIMITS.agentUidBaseMin} (above the system's users)` })
    .max(2 ** 31 - 1 - LIMITS.agentUidRange, {
      error: `must be at most ${2 ** 31 - 1 - LIMITS.agentUidRange}: its ${LIMITS.agentUidRange} agent uids must stay below 2^31`,
    })
    .default(1_000_000_000),
  /** local driver: each agent's network (agent-network.service.ts): internet + the platform's port, the platform's port only, or the host's */
  AGENT_NETWORK: z.enum(['internet', 'platform', 'host']).default('internet'),
  /**
   * added (docs/agents.md "Disk"): local driver: every agent's disk quota in MB (workspace, home and its
   * process.log), replacing the per-plan default of LIMITS.agentDiskQuotaMb; also the largest file it may write
   */
  AGENT_DISK_QUOTA_MB: optionalPositiveInt(16 * 1024 * 1024),
  /**
   * added (docs/agents.md "Model access"): the platform's OpenAI-compatible AI gateway as agents reach it, given to
   * each agent as its model base URL. Unset: the backend's own loopback address with the local driver
   * (`http://127.0.0.1:<BACKEND_PORT>/api/agent-gateway/v1`), `<BACKEND_URL>/api/agent-gateway/v1` with the others
   */
  AGENT_GATEWAY_URL: optionalUrl,
  /** added: model calls per minute per agent through the AI gateway (keyed by agent, not IP) */
  AGENT_GATEWAY_RATE_LIMIT: positiveInt(60),
  WATCHDOG_CHECK_INTERVAL: positiveInt(120),
  WATCHDOG_DEGRADED_CHECK_INTERVAL: positiveInt(5),
  WATCHDOG_STARTUP_FAILURE_THRESHOLD: positiveInt(3),
  WATCHDOG_MAX_REPAIR_ATTEMPTS: positiveInt(2),
  WATCHDOG_CRASH_LOOP_WINDOW: positiveInt(300),
  WATCHDOG_CRASH_LOOP_THRESHOLD: positiveInt(3),
  WATCHDOG_AUTO_REPAIR: bool(true),
  WATCHDOG_BOT_TOKEN: optionalString,
  WATCHDOG_ADMIN_CHAT_ID: optionalString,
  WATCHDOG_BOT_API_URL: url('https://api.telegram.org'),
  WATCHDOG_WEBHOOK_URL: optionalUrl,
  TELEGRAM_API_URL: url('https://api.telegram.org'), // added (docs/channels.md): the providers' API bases, so tests use local fakes
  DISCORD_API_URL: url('https://discord.com/api'),
  DISCORD_GATEWAY_URL: url('wss://gateway.discord.gg'),
  // added (watchdog): §4.12 probe timeout, the §3 repair waits, the lease and poll of the loop, in ms
  WATCHDOG_PROBE_TIMEOUT_MS: positiveInt(5_000),
  WATCHDOG_REPAIR_STOP_WAIT_MS: z.coerce.number().int().min(0).default(5_000),
  WATCHDOG_REPAIR_VERIFY_TIMEOUT_MS: positiveInt(30_000),
  WATCHDOG_LEASE_MS: positiveInt(30_000),
  WATCHDOG_POLL_MS: positiveInt(1_000),
  // added (heartbeats, §4.12): how often a backend looks for due heartbeats, and how long one agent may take to run one
  HEARTBEAT_POLL_MS: positiveInt(5_000),
  HEARTBEAT_TIMEOUT_MS: positiveInt(120_000),
  // added (docs/agents.md "Idle agents sleep"): seconds without traffic before an agent is suspended; unset: never
  AGENT_IDLE_SUSPEND_S: optionalPositiveInt(),
  // added (§4.15 Underground bus): deliver to agents' webhooks on private, loopback or link-local addresses (SSRF guard off)
  UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS: bool(false),
  /** added: how often the backend looks for spend alerts whose threshold was crossed (docs/payments.md "Spend alerts") */
  SPEND_ALERTS_POLL_MS: positiveInt(30_000),
  // added (§4.15 Underground bus): messages per sending agent per minute; over it 429 with Retry-After
  UNDERGROUND_BUS_RATE_LIMIT: positiveInt(60),
  // added (§3 container health): /healthz probes before a running unit counts as `starting`, and the wait between them (§4.12: 2 s)
  CONTAINER_HEALTH_RETRIES: positiveInt(3),
  CONTAINER_HEALTH_INTERVAL_MS: positiveInt(2_000),

  // AI
  ROUTER_API_KEY: optionalString,
  ROUTER_BASE_URL: url('https://openrouter.ai/api/v1'),
  ANTHROPIC_API_KEY: optionalString,
  ANTHROPIC_BASE_URL: url('https://api.anthropic.com'),
  OPENAI_API_KEY: optionalString,
  OPENAI_BASE_URL: url('https://api.openai.com/v1'),
  GROQ_API_KEY: optionalString,
  GROQ_BASE_URL: url('https://api.groq.com/openai/v1'),
  GEMINI_API_KEY: optionalString,
  GEMINI_BASE_URL: url('https://generativelanguage.googleapis.com/v1beta/openai'),
  AI_TIMEOUT_MS: positiveInt(60_000),
  /** added: reject AI chat with 429 QUOTA_EXCEEDED once a user's monthly tokens reach the plan quota (§4.9 "planned"); off by default */
  AI_QUOTA_ENFORCE: bool(false),
  /** added: the sixth provider configuration (§4.9), any OpenAI-compatible endpoint outside the fallback chain; off unless both are set */
  AI_CUSTOM_BASE_URL: optionalUrl,
  AI_CUSTOM_API_KEY: optionalString,
  /** added: the model id the custom provider serves (catalog id `custom/<AI_CUSTOM_MODEL>`) */
  AI_CUSTOM_MODEL: z.string().trim().min(1).max(200).default('default'),
  /**
   * `balance`: every model call of a platform user is priced, held and paid from the owner's ledger
   * balance (docs/payments.md "Model calls from the balance"); `off` (a personal install): model
   * calls are metered but not paid.
   */
  AI_BILLING: z.enum(['off', 'balance'], { error: 'must be off or balance' }).default('off'),
  /**
   * Operator prices for models the catalogue does not price (the custom provider's, a router's
   * unknown ones): JSON, or the path of a JSON file, `{"<model id>": {"input": <USD per million
   * input tokens>, "output": <USD per million output tokens>}}`. The admin page's prices win over it.
   */
  MODEL_PRICES: optionalString,

  // Payments and wallets
  STRIPE_SECRET_KEY: optionalString,
  STRIPE_WEBHOOK_SECRET: optionalString,
  STRIPE_API_URL: url('https://api.stripe.com'),
  /** added: per-request timeout of the card processor's API */
  STRIPE_TIMEOUT_MS: positiveInt(15_000),
  TEMPO_RPC_URL: optionalUrl,
  TEMPO_TESTNET: bool(false),
  MPP_RECIPIENT: optionalString,
  MPP_CURRENCY: z.string().default('0x20c0000000000000000000000000000000000000'),
  CDP_API_KEY_ID: optionalString,
  CDP_API_KEY_SECRET: optionalString,
  CDP_WALLET_SECRET: optionalString,
  CDP_PROJECT_ID: optionalString,
  CDP_API_URL: url('https://api.cdp.coinbase.com'),
  /** added: PEM RSA public key that encrypts imported private keys (default: the provider's own, as its SDK ships it) */
  CDP_IMPORT_PUBLIC_KEY: optionalString,
  BASE_RPC_URL: url('https://mainnet.base.org'),
  X402_GATEWAY_URL: optionalUrl,
  /** added: hex private key (0x + 64 hex) of the platform's payer when the x402 gateway answers HTTP 402 to `pay` (docs/payments.md "x402"); unset: such a payment is refused with 502 */
  X402_PAYER_PRIVATE_KEY: optionalString.pipe(
    z
      .string()
      .regex(/^0x[0-9a-fA-F]{64}$/, { error: 'must be 0x followed by 64 hex digits' })
      .optional(),
  ),
  /** added: most US dollars one user's x402 `pay` calls may take from their wallet balance per UTC day, net of refunds (docs/payments.md "x402") */
  X402_USER_DAILY_CAP_USD: positiveInt(100),
  TRADING_API_URL: optionalUrl,
  TRADING_API_KEY: optionalString,
  /** added: per-call timeout of the trading service (balances, prompt, job status); unreachable or slower answers 503 */
  TRADING_TIMEOUT_MS: positiveInt(15_000),

  // Payment sessions and the v1 gateway (docs/payments.md)
  /** added: EIP-712 key (0x + 64 hex) that signs session receipts; unset: derived from SECRETS_ENCRYPTION_KEY (the same in every process) */
  PAYMENT_RECEIPT_KEY: z
    .string()
    .regex(/^0x[0-9a-fA-F]{64}$/, { error: 'must be 0x followed by 64 hex digits' })
    .optional(),
  /** added: lifetime of a payment session; the expiry job returns the remainder to the wallet after it */
  PAYMENT_SESSION_TTL_MS: positiveInt(24 * 60 * 60 * 1000),
  /** added: how often the web app's expiry job looks for payment sessions past their expiry */
  PAYMENT_SESSION_EXPIRY_INTERVAL_MS: positiveInt(60_000),
  /** added: lifetime of an MPP challenge nonce (§4.8 `expiresAt`) */
  MPP_CHALLENGE_TTL_MS: positiveInt(5 * 60 * 1000),
  /** added: confirmations an MPP payment transaction needs before it pays */
  MPP_CONFIRMATIONS: positiveInt(1),

  // Calendar and storage
  CALENDAR_CLIENT_ID: optionalString,
  CALENDAR_CLIENT_SECRET: optionalString,
  CALENDAR_AUTH_URL: url('https://accounts.google.com/o/oauth2/v2/auth'),
  CALENDAR_TOKEN_URL: url('https://oauth2.googleapis.com/token'),
  CALENDAR_API_URL: url('https://www.googleapis.com/calendar/v3'),
  KV_REST_API_URL: optionalUrl,
  KV_REST_API_TOKEN: optionalString,
  /** added: per-command timeout of the Redis-over-REST store (one retry) */
  KV_TIMEOUT_MS: positiveInt(3_000),
});

export type RawEnv = z.output<typeof envSchema>;

/** The parsed configuration with derived values and "is X configured" flags. */
export type Config = Omit<RawEnv, 'MODEL_PRICES'> & {
  /** MODEL_PRICES, read and checked: model id → USD per million tokens */
  MODEL_PRICES: Record<string, ModelPrice>;
  PUBLIC_URL: string;
  BACKEND_URL: string;
  /** where agents reach the AI gateway (AGENT_GATEWAY_URL or its default) */
  AGENT_GATEWAY_URL: string;
  DATA_DIR: string;
  DASHBOARD_DIR: string;
  /** true when PUBLIC_URL is https: the session cookie gets `Secure`. */
  secureCookies: boolean;
  configured: {
    internalApiKey: boolean;
    turnstile: boolean;
    redis: boolean;
    idp: boolean;
    codehost: boolean;
    hosting: boolean;
    router: boolean;
    stripe: boolean;
    cdp: boolean;
    trading: boolean;
    calendar: boolean;
    kv: boolean;
    watchdogBot: boolean;
  };
};

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** USD per million input and output tokens of one model (MODEL_PRICES, the admin page). */
export type ModelPrice = { input: number; output: number };

/** MODEL_PRICES as JSON or a file path; one clear line when it is neither or holds a bad price. */
function parseModelPrices(value: string | undefined, cwd: string): Record<string, ModelPrice> {
  if (value === undefined) return {};
  let text = value;
  if (!value.startsWith('{')) {
    try {
      text = readFileSync(resolve(cwd, value), 'utf8');
    } catch (err) {
      throw new ConfigError(`Invalid configuration: MODEL_PRICES names a file that cannot be read (${(err as Error).message})`);
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ConfigError(
      'Invalid configuration: MODEL_PRICES is not JSON (an object of model id → {input, output} USD per million tokens)',
    );
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new ConfigError('Invalid configuration: MODEL_PRICES must be an object of model id → {input, output} USD per million tokens');
  }
  const prices: Record<string, ModelPrice> = {};
  for (const [id, p] of Object.entries(json)) {
    const { input, output } = (p ?? {}) as { input?: unknown; output?: unknown };
    const ok = (n: unknown): n is number => typeof n === 'number' && Number.isFinite(n) && n >= 0 && n <= 100_000;
    if (id.length < 1 || id.length > 200 || !ok(input) || !ok(output)) {
      throw new ConfigError(
        `Invalid configuration: MODEL_PRICES["${id.slice(0, 80)}"] must be {"input": n, "output": n}, USD per million tokens between 0 and 100000`,
      );
    }
    prices[id] = { input, output };
  }
  return prices;
}

/**
 * Reads `.env` from `cwd` (when present) under the real environment: real variables win.
 * Throws ConfigError with one line naming the variable and the problem.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, options: { cwd?: string; readDotEnv?: boolean } = {}): Config {
  const cwd = options.cwd ?? process.cwd();
  let fromFile: Record<string, string> = {};
  if (options.readDotEnv !== false) {
    try {
      fromFile = parseEnv(readFileSync(resolve(cwd, '.env'), 'utf8')) as Record<string, string>;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new ConfigError(`.env: ${(err as Error).message}`);
    }
  }
  const merged: Record<string, string | undefined> = { ...fromFile, ...env };
  const parsed = envSchema.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`Invalid configuration: ${name} ${issue.message} (got ${JSON.stringify(merged[name] ?? '')})`);
  }
  const raw = parsed.data;
  const modelPrices = parseModelPrices(raw.MODEL_PRICES, cwd);
  const publicUrl = (raw.PUBLIC_URL ?? `http://localhost:${raw.WEB_PORT}`).replace(/\/+$/, '');
  const backendUrl = (raw.BACKEND_URL ?? `http://127.0.0.1:${raw.BACKEND_PORT}`).replace(/\/+$/, '');
  return {
    ...raw,
    MODEL_PRICES: modelPrices,
    PUBLIC_URL: publicUrl,
    BACKEND_URL: backendUrl,
    AGENT_GATEWAY_URL: (raw.AGENT_GATEWAY_URL ?? defaultModelGatewayUrl(raw, backendUrl)).replace(/\/+$/, ''),
    DATA_DIR: resolve(cwd, raw.DATA_DIR),
    DASHBOARD_DIR: raw.DASHBOARD_DIR ? resolve(cwd, raw.DASHBOARD_DIR) : resolve(import.meta.dirname, '../../dashboard/dist'),
    ADMIN_EMAILS: raw.ADMIN_EMAILS.map((e) => e.toLowerCase()),
    secureCookies: publicUrl.startsWith('https://'),
    configured: {
      internalApiKey: raw.INTERNAL_API_KEY !== undefined,
      turnstile: raw.TURNSTILE_SECRET_KEY !== undefined,
      redis: raw.REDIS_URL !== undefined,
      idp: raw.IDP_CLIENT_ID.length > 0 && raw.IDP_CLIENT_SECRET !== undefined,
      codehost: raw.CODEHOST_CLIENT_ID !== undefined && raw.CODEHOST_CLIENT_SECRET !== undefined,
      // local, docker and kubernetes need no API key (a socket, a kubeconfig or the in-cluster account); render does
      hosting: raw.HOSTING_DRIVER !== 'render' || raw.HOSTING_API_KEY !== undefined,
      router: raw.ROUTER_API_KEY !== undefined,
      stripe: raw.STRIPE_SECRET_KEY !== undefined,
      cdp: raw.CDP_API_KEY_ID !== undefined && raw.CDP_API_KEY_SECRET !== undefined,
      trading: raw.TRADING_API_URL !== undefined,
      calendar: raw.CALENDAR_CLIENT_ID !== undefined && raw.CALENDAR_CLIENT_SECRET !== undefined,
      kv: raw.KV_REST_API_URL !== undefined && raw.KV_REST_API_TOKEN !== undefined,
      watchdogBot: raw.WATCHDOG_BOT_TOKEN !== undefined && raw.WATCHDOG_ADMIN_CHAT_ID !== undefined,
    },
  };
}

/** The path of the AI gateway on the backend (docs/agents.md "Model access"). */
export const MODEL_GATEWAY_PATH = '/api/agent-gateway/v1';

/**
 * AGENT_GATEWAY_URL's default. A local agent runs on this machine and reaches the backend on its
 * own listening address (the loopback one when the backend listens on every interface), which the
 * local driver's sandbox lets through; a remote agent (container drivers) reaches it at BACKEND_URL.
 */
function defaultModelGatewayUrl(raw: Pick<RawEnv, 'HOSTING_DRIVER' | 'HOST' | 'BACKEND_PORT'>, backendUrl: string): string {
  if (raw.HOSTING_DRIVER !== 'local') return `${backendUrl}${MODEL_GATEWAY_PATH}`;
  const host = ['', '0.0.0.0', '::', 'localhost'].includes(raw.HOST) ? '127.0.0.1' : raw.HOST;
  return `http://${isIP(host) === 6 ? `[${host}]` : host}:${raw.BACKEND_PORT}${MODEL_GATEWAY_PATH}`;
}

/** true when `email` is in ADMIN_EMAILS (case-insensitive; the list is lower-cased at parse time). */
export function isAdminEmail(config: Pick<Config, 'ADMIN_EMAILS'>, email: string | null | undefined): boolean {
  return !!email && config.ADMIN_EMAILS.includes(email.trim().toLowerCase());
}

/**
 * Integrations that are off because their settings are absent, each with the variable(s) that
 * turn it on. main.ts logs them in one line at start-up, so an operator sees that e.g. the bridge
 * (closed without BRIDGE_SECRET) or the hosting status webhook answers 503 (docs/security.md).
 * The model provider, mail and card payments have start-up lines of their own (src/platform/start-up-report.ts).
 */
export function integrationsOff(config: Config): string[] {
  const off: [boolean, string][] = [
    [config.BRIDGE_SECRET === undefined, 'bridge (BRIDGE_SECRET)'],
    [config.HOSTING_WEBHOOK_SECRET === undefined, 'hosting status webhook (HOSTING_WEBHOOK_SECRET)'],
    [!config.configured.turnstile, 'bot detection on register (TURNSTILE_SECRET_KEY)'],
    [!config.configured.idp, 'identity provider sign-in (IDP_CLIENT_ID, IDP_CLIENT_SECRET)'],
    [!config.configured.codehost, 'code host sign-in (CODEHOST_CLIENT_ID, CODEHOST_CLIENT_SECRET)'],
    [!config.configured.trading, 'trading service (TRADING_API_URL)'],
    [!config.configured.calendar, 'calendar (CALENDAR_CLIENT_ID, CALENDAR_CLIENT_SECRET)'],
    [!config.configured.kv, 'hosting status key-value store (KV_REST_API_URL, KV_REST_API_TOKEN)'],
  ];
  return off.filter(([isOff]) => isOff).map(([, name]) => name);
}
