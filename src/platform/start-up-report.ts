/**
 * What the start-up block says about the platform's settings (main.ts prints it, docs/configuration.md
 * "What start-up prints"): the model provider agents use, where agents run, and, one line each,
 * a feature that is off for lack of a setting, with what still works. Each line is a claim about
 * the code's behaviour; keep it true when that behaviour changes.
 */
import { type Config, integrationsOff } from '../config/env.ts';
import { PROVIDER_NAMES, type ProviderName } from '../domains/ai/index.ts';

/** A line the hosting driver says about itself (src/domains/agents/drivers/driver-registry.service.ts `log`). */
export type HostingLine = { level: 'info' | 'warn'; message: string };

export type StartUpLine = { level: 'info' | 'warn'; msg: string; fields?: Record<string, unknown> };

/** the setting named beside each provider: its key, or its address where that is what one sets (src/domains/ai/providers/provider-registry.service.ts) */
const PROVIDER_SETTING: Record<ProviderName, { key: string; baseUrl: keyof Config }> = {
  router: { key: 'ROUTER_BASE_URL', baseUrl: 'ROUTER_BASE_URL' },
  gemini: { key: 'GEMINI_API_KEY', baseUrl: 'GEMINI_BASE_URL' },
  groq: { key: 'GROQ_API_KEY', baseUrl: 'GROQ_BASE_URL' },
  anthropic: { key: 'ANTHROPIC_API_KEY', baseUrl: 'ANTHROPIC_BASE_URL' },
  openai: { key: 'OPENAI_API_KEY', baseUrl: 'OPENAI_BASE_URL' },
  custom: { key: 'AI_CUSTOM_BASE_URL', baseUrl: 'AI_CUSTOM_BASE_URL' },
};

const hostOf = (url: unknown): string => {
  try {
    return new URL(String(url)).host;
  } catch {
    return String(url);
  }
};

/**
 * The model providers agents' model calls go to (through the platform's AI gateway), each with
 * the host it calls and the setting that turned it on; a warning when there is none, since then
 * no agent can answer (src/domains/ai/model-choice.service.ts).
 */
export function modelProviderLine(config: Config, providers: Record<ProviderName, { configured: boolean }>): StartUpLine {
  const on = PROVIDER_NAMES.filter((name) => providers[name].configured);
  if (on.length === 0)
    return {
      level: 'warn',
      msg: 'no model provider configured: agents cannot answer; set ROUTER_BASE_URL and ROUTER_API_KEY or a provider key (docs/configuration.md)',
    };
  const named = on.map((name) => {
    const { key, baseUrl } = PROVIDER_SETTING[name];
    const model = name === 'custom' ? `, model custom/${config.AI_CUSTOM_MODEL}` : '';
    return `${name} at ${hostOf(config[baseUrl])} (${key}${model})`;
  });
  return {
    level: 'info',
    msg: `model provider${on.length > 1 ? 's' : ''}: ${named.join('; ')}`,
    fields: { providers: on },
  };
}

const CONTAINER_HOSTS: Record<Exclude<Config['HOSTING_DRIVER'], 'local'>, string> = {
  docker: 'Docker (DOCKER_HOST)',
  kubernetes: 'Kubernetes (KUBECONFIG or the cluster it runs in)',
  render: 'Render (HOSTING_API_URL)',
};

/**
 * Where agents run when they are not this machine's processes (the local driver says what its
 * sandbox is itself: src/domains/agents/drivers/local/containment/sandbox.service.ts).
 */
export function hostingLine(config: Config): StartUpLine | undefined {
  if (config.HOSTING_DRIVER === 'local') return undefined;
  // the agents services answer every driver call 500 `Hosting unavailable` then (src/domains/agents/agents.backend.service.ts)
  if (!config.configured.hosting)
    return {
      level: 'warn',
      msg: `HOSTING_DRIVER=${config.HOSTING_DRIVER} without HOSTING_API_KEY: agents cannot be provisioned or started (500 "Hosting unavailable"); set HOSTING_API_KEY (docs/configuration.md)`,
    };
  return {
    level: 'info',
    msg: `agents run in containers of their own on ${CONTAINER_HOSTS[config.HOSTING_DRIVER]}, HOSTING_DRIVER=${config.HOSTING_DRIVER}; the container is their sandbox`,
  };
}

/**
 * Features a newcomer reaches for that are off, or half on, for lack of a setting: one line each,
 * saying what does not work and what does instead. The other integrations that are off follow in
 * one line (integrationsOff).
 */
export function featureLines(config: Config): StartUpLine[] {
  const lines: StartUpLine[] = [];
  if (config.SMTP_URL === undefined)
    lines.push({
      level: 'warn',
      msg: 'password reset e-mails are off (SMTP_URL unset): "forgot password" answers that it is unavailable and spend alerts go to webhooks and the dashboard only; an admin can issue a reset link with npm run admin -- reset-link <email> or on the Admin page',
    });
  if (!config.configured.stripe)
    lines.push({
      level: 'info',
      msg: `card payments are off (STRIPE_SECRET_KEY unset): no card top-ups and no plan checkout; every account gets the ${config.DEFAULT_PLAN} plan (DEFAULT_PLAN), and an admin credits a wallet with npm run admin -- credit <email> <usd>`,
    });
  else if (config.STRIPE_WEBHOOK_SECRET === undefined)
    lines.push({
      level: 'warn',
      msg: "STRIPE_WEBHOOK_SECRET is not set: Stripe's webhook calls are refused, so paid card top-ups are never credited and subscriptions never start; set it to the webhook endpoint's signing secret (docs/payments.md)",
    });
  const off = integrationsOff(config);
  if (off.length > 0) lines.push({ level: 'info', msg: `other integrations off (settings unset): ${off.join('; ')}` });
  return lines;
}
