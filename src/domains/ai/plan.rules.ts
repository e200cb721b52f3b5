/**
 * §2 Plans, §4.9 and §5 rules of the AI layer as pure functions: the plan middleware's header
 * checks, which models a plan may use, task-tag selection, and algorithm mode.
 */
import { LIMITS } from '../../config/limits.ts';
import type { AdminFacts } from '../accounts/index.ts';
import type { CatalogModel } from './catalog.service.ts';
import type { ChatMessage } from './providers/provider.contract.ts';

export const PLANS = ['label', 'solo', 'collective', 'network'] as const;
export type Plan = (typeof PLANS)[number];

export const TASK_TYPES = ['coding', 'analysis', 'creative', 'long', 'general'] as const;
export type TaskType = (typeof TASK_TYPES)[number];

/** §4.9 task selection tags. */
export const TASK_TAGS: Record<TaskType, readonly string[]> = {
  coding: ['coding', 'logic'],
  analysis: ['analysis'],
  creative: ['creative'],
  long: ['long-context'],
  general: ['general', 'balanced'],
};

/** §5 header context plus the plan middleware's verdict. */
export type AiActor = {
  userId: string;
  email: string | undefined;
  role: string | undefined;
  plan: Plan;
  /** ADMIN_EMAILS member: network-level access, plan and subscription checks bypassed */
  isAdmin: boolean;
  /**
   * A platform user (their stored plan decided): their calls are capped and, with
   * AI_BILLING=balance, paid from their balance. A caller under the §4.9 header rules is the
   * operator's own tooling: metered, never billed.
   */
  billable?: boolean;
  /**
   * The API key a model call is made for (docs/payments.md "API keys"): set by the model gateway's
   * route once it is checked to be the calling agent's owner's, and by the paid gateway for the key
   * a plugin call came with. Its budget is held too, and the usage recorded with it.
   */
  keyId?: string | undefined;
};

export type PlanCheck = { ok: true; actor: AiActor } | { ok: false; code: 'PLAN_REQUIRED' | 'SUBSCRIPTION_REQUIRED'; error: string };

const header = (v: string | string[] | undefined): string | undefined => {
  const s = Array.isArray(v) ? v[0] : v;
  const t = s?.trim();
  return t ? t : undefined;
};

/** The subscription-id header (§4.9: named with the card processor's brand). */
export const SUBSCRIPTION_HEADER = 'x-stripe-subscription-id';

/**
 * §4.9/§5 plan middleware. `x-user-id` defaults to `anonymous`; an admin email (ADMIN_EMAILS,
 * case-insensitive) gets `network` and skips both checks; otherwise `x-user-plan` must name a plan
 * and the subscription-id header must be present.
 */
export function checkPlan(
  headers: Record<string, string | string[] | undefined>,
  isAdminEmail: (email: string | undefined) => boolean,
): PlanCheck {
  const email = header(headers['x-user-email'])?.slice(0, 320);
  const userId = header(headers['x-user-id'])?.slice(0, 200) ?? 'anonymous';
  const role = header(headers['x-user-role'])?.slice(0, 64);
  if (isAdminEmail(email)) return { ok: true, actor: { userId, email, role, plan: 'network', isAdmin: true } };
  const plan = header(headers['x-user-plan'])?.toLowerCase();
  if (!plan || !(PLANS as readonly string[]).includes(plan)) {
    return { ok: false, code: 'PLAN_REQUIRED', error: 'A subscription plan is required (x-user-plan: solo, collective, label or network)' };
  }
  if (!header(headers[SUBSCRIPTION_HEADER])) {
    return { ok: false, code: 'SUBSCRIPTION_REQUIRED', error: 'An active subscription is required' };
  }
  return { ok: true, actor: { userId, email, role, plan: plan as Plan, isAdmin: false } };
}

/** A platform user's stored plan (users table), as the plan middleware reads it. */
export type StoredPlan = {
  plan: Plan;
  subscriptionStatus: string;
  isAdmin: boolean;
  email: string;
  emailVerified: boolean;
  /** a password set before the address was verified: ADMIN_EMAILS does not count (src/domains/accounts/admin.rules.ts) */
  passwordPredatesVerification: boolean;
};

/**
 * The plan middleware for a caller whose `x-user-id` is a platform user: the plan and subscription
 * come from the database (what the card processor's webhooks and the admins set, §2), never from
 * headers the caller writes. A subscription is required only where people can subscribe (a card
 * processor is configured); without one every account has DEFAULT_PLAN (docs/admin.md). Admins
 * (stored right, or ADMIN_EMAILS) get network and skip the check.
 */
export function checkStoredPlan(
  stored: StoredPlan,
  headers: Record<string, string | string[] | undefined>,
  options: {
    subscriptionsRequired: boolean;
    /** the admin rule over the stored facts (ADMIN_EMAILS counts only for a proved address: src/domains/accounts/admin.rules.ts) */
    isAdminUser: (facts: AdminFacts) => boolean;
    userId: string;
  },
): PlanCheck {
  const role = header(headers['x-user-role'])?.slice(0, 64);
  const base = { userId: options.userId, email: stored.email, role };
  const admin =
    stored.isAdmin ||
    options.isAdminUser({
      email: stored.email,
      is_admin: false,
      email_verified: stored.emailVerified,
      password_predates_verification: stored.passwordPredatesVerification,
    });
  if (admin) return { ok: true, actor: { ...base, plan: 'network', isAdmin: true, billable: true } };
  if (options.subscriptionsRequired && stored.subscriptionStatus !== 'active') {
    return { ok: false, code: 'SUBSCRIPTION_REQUIRED', error: 'An active subscription is required' };
  }
  return { ok: true, actor: { ...base, plan: stored.plan, isAdmin: false, billable: true } };
}

/** §2: the first N router models in plan order; `null` means every model (network, admins). */
export function allowedModelIds(actor: Pick<AiActor, 'plan' | 'isAdmin'>, routerModels: readonly CatalogModel[]): string[] | null {
  const n = actor.isAdmin ? Number.POSITIVE_INFINITY : (LIMITS.aiPlanModelCount[actor.plan] ?? 0);
  if (!Number.isFinite(n)) return null;
  return routerModels.slice(0, n).map((m) => m.id);
}

/**
 * §4.9 task selection over the router's models: the first model carrying one of the task's tags
 * wins; otherwise the first available model.
 */
export function selectModel(candidates: readonly CatalogModel[], taskType: TaskType): CatalogModel | undefined {
  const usable = candidates.filter((m) => m.available);
  const tags = TASK_TAGS[taskType];
  return usable.find((m) => m.tags.some((t) => tags.includes(t))) ?? usable[0];
}

export const ALGORITHM_PHASES = ['Observe', 'Think', 'Plan', 'Build', 'Execute', 'Verify', 'Learn'] as const;

export const ALGORITHM_SYSTEM_PROMPT = [
  'You solve problems with a structured 7-phase method. Answer in these phases, each as a heading:',
  '1. Observe: restate the problem and the facts given.',
  '2. Think: identify constraints, unknowns and possible approaches.',
  '3. Plan: choose an approach and list the steps.',
  '4. Build: produce the solution (code, text or design).',
  '5. Execute: work through the steps and show the results.',
  '6. Verify: check the result against the problem and the constraints; fix what fails.',
  '7. Learn: note what to remember or improve next time.',
  'If the user only greets you or makes small talk, reply naturally and briefly without the phases.',
].join('\n');

const GREETING =
  /^(hi|hii+|hello|hey|heya|hiya|yo|sup|howdy|greetings|hola|bonjour|good (morning|afternoon|evening|day)|thanks|thank you|thx|ty|ok|okay|bye|goodbye|what'?s up|how are you( doing)?|how'?s it going)( there| all| everyone| friend)?[\s!.?,:;)(-]*$/i;

/** A short greeting or pleasantry that needs no structured answer. */
export const isTrivialGreeting = (text: string) => text.length <= 60 && GREETING.test(text.trim());

const hasPhases = (text: string) => {
  const lower = text.toLowerCase();
  return ALGORITHM_PHASES.every((p) => lower.includes(p.toLowerCase()));
};

/**
 * §4.9 algorithm mode: prepends the 7-phase system prompt unless a system message already names
 * all seven phases, or the latest user message is a trivial greeting (answered naturally).
 */
export function applyAlgorithmMode(messages: ChatMessage[]): ChatMessage[] {
  if (messages.some((m) => m.role === 'system' && hasPhases(m.content))) return messages;
  const lastUser = messages.findLast((m) => m.role === 'user');
  if (lastUser && isTrivialGreeting(lastUser.content)) return messages;
  return [{ role: 'system', content: ALGORITHM_SYSTEM_PROMPT }, ...messages];
}

/** Monthly token quota of a plan (§4.9; Infinity for network and admins). */
export const monthlyQuota = (actor: Pick<AiActor, 'plan' | 'isAdmin'>): number =>
  actor.isAdmin ? Number.POSITIVE_INFINITY : (LIMITS.aiMonthlyTokenQuota[actor.plan] ?? 0);
