/**
 * What every driver gives an agent: its environment (§8 "Environment variables set on
 * containers", minus the platform's own secrets: a deliberate improvement on §8, see below) and
 * its resources by plan (§4.7 "Backend container resources by plan").
 */
import type { AgentDeploySpec } from './driver.contract.ts';

/**
 * Never given to an agent, whatever the caller passes in `spec.env`: §8 lists DATABASE_URL,
 * INTERNAL_API_KEY and WALLET_ENCRYPTION_KEY among the container variables, which would let any
 * agent (running user-chosen tools) read every tenant's data. Agents get their own scoped key instead.
 */
export const PLATFORM_SECRET_ENV = new Set([
  'DATABASE_URL',
  'INTERNAL_API_KEY',
  'WALLET_ENCRYPTION_KEY',
  'SECRETS_ENCRYPTION_KEY',
  'BRIDGE_SECRET',
  'HOSTING_API_KEY',
  'HOSTING_WEBHOOK_SECRET',
  'STRIPE_SECRET_KEY',
  'STRIPE_WEBHOOK_SECRET',
  'CDP_API_KEY_SECRET',
  'CDP_WALLET_SECRET',
  'IDP_CLIENT_SECRET',
  'CODEHOST_CLIENT_SECRET',
  'CALENDAR_CLIENT_SECRET',
  'KV_REST_API_TOKEN',
  'TURNSTILE_SECRET_KEY',
  'REDIS_URL',
  'TRADING_API_KEY',
]);

/**
 * The agent's environment. Both runtime names are set for the shared values (AGENT_* for the
 * built-in runtime, OPENCLAW_* for the OpenClaw image), so one environment serves either.
 * `gatewayPort` is the port the gateway listens on (18789 in a container, a free port locally).
 */
export function agentEnvironment(spec: AgentDeploySpec, options: { gatewayPort: number; gatewayUrl: string }): Record<string, string> {
  const env: Record<string, string> = {
    NODE_ENV: 'production',
    TERM: 'xterm-256color',
    OPENCLAW_NO_RESPAWN: '1',
    AGENT_ID: spec.agentId,
    AGENT_USER_ID: spec.userId,
    AGENT_PLAN: spec.plan || 'solo',
    AGENT_MODE: 'home',
    AGENT_PORT: String(options.gatewayPort),
    AGENT_GATEWAY_TOKEN: spec.gatewayToken,
    AGENT_GATEWAY_URL: options.gatewayUrl,
    AGENT_BACKEND_URL: spec.backendUrl,
    AGENT_PLATFORM_API_KEY: spec.platformApiKey,
    AGENT_CONFIG_JSON: JSON.stringify(spec.config ?? {}),
    OPENCLAW_GATEWAY_TOKEN: spec.gatewayToken,
    OPENCLAW_GATEWAY_PORT: String(options.gatewayPort),
  };
  for (const [k, v] of Object.entries(spec.env ?? {})) {
    if (!PLATFORM_SECRET_ENV.has(k) && /^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) env[k] = v;
  }
  return env;
}

export type PlanResources = { plan: string; memoryMb: number; cpus: number; renderPlan: string };

/** §4.7: underground 2 GB/1 CPU; starter 2/1; pro 4/2; scale 8/4; enterprise 16/4; white_glove 32/8. */
const RESOURCES: Record<string, Omit<PlanResources, 'plan'>> = {
  underground: { memoryMb: 2048, cpus: 1, renderPlan: 'standard' },
  starter: { memoryMb: 2048, cpus: 1, renderPlan: 'standard' },
  pro: { memoryMb: 4096, cpus: 2, renderPlan: 'pro' },
  scale: { memoryMb: 8192, cpus: 4, renderPlan: 'pro_plus' },
  enterprise: { memoryMb: 16384, cpus: 4, renderPlan: 'pro_max' },
  white_glove: { memoryMb: 32768, cpus: 8, renderPlan: 'pro_ultra' },
};

/**
 * Subscription plans map onto the resource plans (our choice; §4.7 does not pair them):
 * solo → starter, collective → pro, label → scale, network → enterprise. The hosting platform's
 * own plan names ("standard plan names") are accepted as they are.
 */
const SUBSCRIPTION_TO_RESOURCE: Record<string, string> = {
  solo: 'starter',
  collective: 'pro',
  label: 'scale',
  network: 'enterprise',
  free: 'starter',
};
const RENDER_PLANS: Record<string, Omit<PlanResources, 'plan' | 'renderPlan'>> = {
  starter: { memoryMb: 512, cpus: 0.5 },
  standard: { memoryMb: 2048, cpus: 1 },
  pro: { memoryMb: 4096, cpus: 2 },
  pro_plus: { memoryMb: 8192, cpus: 4 },
  pro_max: { memoryMb: 16384, cpus: 4 },
  pro_ultra: { memoryMb: 32768, cpus: 8 },
};

export function planResources(plan: string | undefined): PlanResources {
  const p = (plan ?? '').trim().toLowerCase();
  const resourcePlan = SUBSCRIPTION_TO_RESOURCE[p] ?? p;
  const r = RESOURCES[resourcePlan];
  if (r) return { plan: resourcePlan, ...r };
  // `pro` is both a §4.7 resource plan and a Render plan name; RESOURCES wins above
  const render = RENDER_PLANS[p];
  if (render) return { plan: p, ...render, renderPlan: p };
  return { plan: 'starter', ...RESOURCES.starter! };
}
