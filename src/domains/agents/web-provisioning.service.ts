/**
 * The rules of web provisioning (§4.7, §2 Plans): which plan an agent runs on, how many agents an
 * account may have and the one answer when it has too many, the provider a model goes to, and
 * the web shape of an agent. Pure functions: agents.web.service.ts applies them.
 */
import { LIMITS } from '../../config/limits.ts';
import { AppError } from '../../lib/errors.ts';
import type { AgentRow } from './agents.repo.ts';

export const DEFAULT_MODEL = 'claude-opus-4-6';
/** §4.7: tier → plan forwarded to the backend; admins (no tier given) get network-level access (§2 Plans). */
export const TIER_TO_PLAN: Record<string, string> = { starter: 'solo', pro: 'collective', enterprise: 'label' };
/** The web limit follows the user's subscription plan, read as a tier (inverse of TIER_TO_PLAN; network counts as enterprise). */
const PLAN_TO_TIER: Record<string, string> = { solo: 'starter', collective: 'pro', label: 'enterprise', network: 'enterprise' };

export function webLimit(plan: string | undefined, isAdmin: boolean): number {
  if (isAdmin) return LIMITS.webAgentLimits.enterprise!;
  const tier = plan ? PLAN_TO_TIER[plan] : undefined;
  return (tier && LIMITS.webAgentLimits[tier]) || LIMITS.webAgentLimitDefault;
}

const PLAN_RANK: Record<string, number> = { solo: 0, collective: 1, label: 2, network: 3 };

const agents = (n: number) => `${n} agent${n === 1 ? '' : 's'}`;

/**
 * §4.7 / §7: the web provisioning route's one answer to "over the agent limit", for everyone and
 * whoever counted (this app by the account's plan, or the backend by the plan the agent runs on):
 * 429 `AGENT_LIMIT_REACHED` with `current`, `limit` and `plan`, and a message that says the limit
 * and how to raise it (docs/agents.md "Agent limits").
 */
export function agentLimitReached(o: {
  plan: string;
  limit: number;
  current: number;
  /** who counted: the account's limit here, or the backend's for the plan (size) the agent asked for */
  by: 'account' | 'size';
  isAdmin: boolean;
  /** a card processor is configured: plans can be bought in Settings */
  canSubscribe: boolean;
}) {
  const limit =
    o.by === 'size'
      ? `agents on the ${o.plan} plan (the size you chose) are limited to ${agents(o.limit)} per account`
      : o.isAdmin
        ? `an admin may have ${agents(o.limit)}`
        : `the ${o.plan} plan allows ${agents(o.limit)}`;
  const raise =
    o.by === 'size'
      ? 'Choose a larger size, or delete an agent.'
      : o.isAdmin || (PLAN_RANK[o.plan] ?? 0) >= PLAN_RANK.label!
        ? 'Delete an agent to provision another.'
        : o.canSubscribe
          ? 'Delete an agent, or subscribe to a larger plan in Settings.'
          : 'Delete an agent, or ask an admin to move your account to a larger plan.';
  return new AppError(
    'AGENT_LIMIT_REACHED',
    `Agent limit reached: ${limit}, and you have ${o.current}. ${raise}`,
    { current: o.current, limit: o.limit, plan: o.plan },
    429,
  );
}

/**
 * The plan an agent runs on (its resources and tool profile, §4.7, §8): the owner's own plan
 * (admins: network, §2). The client's `tier` may only choose a plan within it, never above:
 * a solo account asking for `enterprise` gets 402 PLAN_REQUIRED, not a label agent.
 */
export function agentPlan(ownerPlan: string, tier: string | undefined): string {
  if (!tier) return ownerPlan;
  const wanted = TIER_TO_PLAN[tier]!;
  if ((PLAN_RANK[wanted] ?? 0) > (PLAN_RANK[ownerPlan] ?? 0)) {
    throw new AppError('PLAN_REQUIRED', `Tier ${tier} needs the ${wanted} plan; this account is on ${ownerPlan}`, {
      plan: ownerPlan,
      requiredPlan: wanted,
    });
  }
  return wanted;
}

/** §4.7: `claude-opus-4-6` → anthropic; otherwise the provider comes from config (default router). */
export function providerFor(model: string, config: Record<string, unknown> | undefined): string {
  if (model === DEFAULT_MODEL) return 'anthropic';
  const p = config?.aiProvider;
  return typeof p === 'string' && p.trim() ? p.trim() : 'router';
}

/**
 * The agent's WebSocket through the platform's authenticated proxy (docs/agents.md "Talk to your
 * agent"): the gateway's own address needs the gateway token, which no client ever gets.
 */
const websocketUrl = (a: AgentRow, publicUrl: string) =>
  `${publicUrl.replace(/\/+$/, '').replace(/^http/, 'ws')}/api/agents/${encodeURIComponent(a.id)}/ws`;

/** §2 Agent, web shape. */
export const webAgent = (a: AgentRow, publicUrl: string) => ({
  id: a.id,
  name: a.name,
  model: a.model,
  status: a.status,
  websocketUrl: websocketUrl(a, publicUrl),
  createdAt: a.created_at.toISOString(),
  updatedAt: a.updated_at.toISOString(),
});
