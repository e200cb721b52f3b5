/**
 * The one place that reads the environment (../shared/CONFIG.md is the contract for every name).
 * `loadConfig` parses once into a typed object that is passed explicitly to everything else;
 * nothing else in the code base reads `process.env`.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseEnv } from 'node:util';
import { z } from 'zod';

/** Booleans accept true/false/1/0 only (CONFIG.md rules), never "any non-empty string". */
const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0'], { error: 'must be one of true, false, 1, 0' })
    .optional()
    .transform((v) => (v === undefined ? fallback : v === 'true' || v === '1'));

const port = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);
const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));
const url = (fallback: string) => z.url({ error: 'must be a URL' }).default(fallback);
const optionalUrl = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()))
  .pipe(z.url({ error: 'must be a URL' }).optional());
const list = z
  .string()
  .optional()
  .transform((v) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );

/** Raw schema: one entry per variable of CONFIG.md (plus settings we added, marked "added"). */
const envSchema = z.object({
  // Process and storage
  HOST: z.string().default('127.0.0.1'),
  WEB_PORT: port(3000),
  BACKEND_PORT: port(3001),
  PUBLIC_URL: optionalUrl,
  BACKEND_URL: optionalUrl,
  DATA_DIR: z.string().default('./data'),
  DATABASE_URL: optionalString,
  DATABASE_POOL_SIZE: positiveInt(10),
  REDIS_URL: optionalString,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TRUST_PROXY: bool(false),
  /** added: which app(s) this process serves; `npm start -- web|backend` sets it too. */
  APP: z.enum(['all', 'web', 'backend']).default('all'),
  /** added: maximum request body size in bytes. */
  BODY_LIMIT: positiveInt(1_048_576),

  // Secrets and access
  INTERNAL_API_KEY: optionalString,
  ADMIN_EMAILS: list,
  WALLET_ENCRYPTION_KEY: optionalString,
  SECRETS_ENCRYPTION_KEY: optionalString,
  BRIDGE_SECRET: optionalString,
  HOSTING_WEBHOOK_SECRET: optionalString,
  TURNSTILE_SECRET_KEY: optionalString,
  TURNSTILE_VERIFY_URL: url('https://challenges.cloudflare.com/turnstile/v0/siteverify'),
  REGISTER_RATE_LIMIT: positiveInt(5),
  AI_RATE_LIMIT: positiveInt(30),
  DEMO_RATE_LIMIT: positiveInt(20),

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

  // Agents and hosting
  HOSTING_DRIVER: z.enum(['local', 'render', 'docker', 'kubernetes']).default('local'),
  HOSTING_API_URL: url('https://api.render.com/v1'),
  HOSTING_API_KEY: optionalString,
  HOSTING_OWNER_ID: optionalString,
  AGENTS_DOMAIN: z.string().min(1).default('agents.localhost'),
  AGENT_IMAGE: z.string().min(1).default('ghcr.io/openclaw/openclaw:latest'),
  AGENT_RUNTIME: z.enum(['builtin', 'openclaw']).default('builtin'),
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

  // Payments and wallets
  STRIPE_SECRET_KEY: optionalString,
  STRIPE_WEBHOOK_SECRET: optionalString,
  STRIPE_API_URL: url('https://api.stripe.com'),
  TEMPO_RPC_URL: optionalUrl,
  TEMPO_TESTNET: bool(false),
  MPP_RECIPIENT: optionalString,
  MPP_CURRENCY: z.string().default('0x20c0000000000000000000000000000000000000'),
  CDP_API_KEY_ID: optionalString,
  CDP_API_KEY_SECRET: optionalString,
  CDP_WALLET_SECRET: optionalString,
  CDP_PROJECT_ID: optionalString,
  CDP_API_URL: url('https://api.cdp.coinbase.com'),
  BASE_RPC_URL: url('https://mainnet.base.org'),
  X402_GATEWAY_URL: optionalUrl,
  TRADING_API_URL: optionalUrl,
  TRADING_API_KEY: optionalString,
  /** added: per-call timeout of the trading service (balances, prompt, job status); unreachable or slower answers 503 */
  TRADING_TIMEOUT_MS: positiveInt(15_000),

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
export type Config = RawEnv & {
  PUBLIC_URL: string;
  BACKEND_URL: string;
  DATA_DIR: string;
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

/**
 * Reads `.env` from `cwd` (when present) under the real environment: real variables win.
 * Throws ConfigError with one line naming the variable and the problem.
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  options: { cwd?: string; readDotEnv?: boolean } = {},
): Config {
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
  const publicUrl = (raw.PUBLIC_URL ?? `http://localhost:${raw.WEB_PORT}`).replace(/\/+$/, '');
  const backendUrl = (raw.BACKEND_URL ?? `http://127.0.0.1:${raw.BACKEND_PORT}`).replace(/\/+$/, '');
  return {
    ...raw,
    PUBLIC_URL: publicUrl,
    BACKEND_URL: backendUrl,
    DATA_DIR: resolve(cwd, raw.DATA_DIR),
    ADMIN_EMAILS: raw.ADMIN_EMAILS.map((e) => e.toLowerCase()),
    secureCookies: publicUrl.startsWith('https://'),
    configured: {
      internalApiKey: raw.INTERNAL_API_KEY !== undefined,
      turnstile: raw.TURNSTILE_SECRET_KEY !== undefined,
      redis: raw.REDIS_URL !== undefined,
      idp: raw.IDP_CLIENT_ID.length > 0 && raw.IDP_CLIENT_SECRET !== undefined,
      codehost: raw.CODEHOST_CLIENT_ID !== undefined && raw.CODEHOST_CLIENT_SECRET !== undefined,
      hosting: raw.HOSTING_DRIVER === 'local' || raw.HOSTING_API_KEY !== undefined,
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

/** true when `email` is in ADMIN_EMAILS (case-insensitive; the list is lower-cased at parse time). */
export function isAdminEmail(config: Pick<Config, 'ADMIN_EMAILS'>, email: string | null | undefined): boolean {
  return !!email && config.ADMIN_EMAILS.includes(email.trim().toLowerCase());
}
