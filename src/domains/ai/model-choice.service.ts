/**
 * Which model an agent runs (docs/agents.md "Model"): one id the platform can route, chosen when
 * the agent is provisioned and when its owner changes it, shown by every page and answer, and
 * called for every message (the model gateway reads it at call time: a change applies at once).
 *
 * §4.7's provisioning names three models, none an id the catalogue routes; they map, by the
 * owner's plan and the providers configured:
 *   `claude-opus-4-6` (and an omitted model, §4.7's default): the most capable Claude model the
 *                     plan allows that a provider serves, else the plan's default model;
 *   `gpt-4`:          the most capable OpenAI model likewise, else the plan's default model;
 *   `custom`:         `custom/<AI_CUSTOM_MODEL>`, the operator's own provider (AI_CUSTOM_BASE_URL).
 * Any other name must be a model the plan allows and a configured provider serves. A model that
 * cannot run is refused (400 MODEL_CANNOT_RUN) with the ids that can, never replaced silently.
 * With no provider configured at all, nothing can run: the names map to the catalogue's ids
 * (claude → anthropic/claude-opus-4.1, gpt-4 → openai/gpt-4.1) and the agent answers that no model
 * is configured until one is.
 */

import type { Config } from '../../config/env.ts';
import { AppError } from '../../lib/errors.ts';
import { isAdminUser } from '../accounts/index.ts';
import type { Catalog, CatalogModel } from './catalog.service.ts';
import { type AiActor, allowedModelIds, checkStoredPlan, selectModel } from './plan.rules.ts';
import type { ChatProvider, ProviderName } from './providers/provider.contract.ts';
import type { StoredPlans } from './stored-plans.service.ts';

/** The model id that means "the plan's pick for general tasks" (§4.9 task selection). */
export const AUTO_MODEL = 'auto';
/** The model id that means "the calling agent's own model" (what agents' runtimes are given). */
export const DEFAULT_MODEL_ALIAS = 'default';

/** §4.7's provisioning default. */
export const SPEC_DEFAULT_MODEL = 'claude-opus-4-6';

/** The seed's names, and the catalogue ids each prefers, most capable first. */
const FAMILIES: Record<string, readonly string[]> = {
  'claude-opus-4-6': [
    'anthropic/claude-opus-4.1',
    'anthropic/claude-sonnet-4.5',
    'anthropic/claude-sonnet-4-5',
    'anthropic/claude-haiku-4.5',
    'anthropic/claude-haiku-4-5',
  ],
  'gpt-4': ['openai/gpt-4.1', 'openai/o3', 'openai/gpt-4.1-mini', 'openai/gpt-4o-mini', 'openai/gpt-4.1-nano'],
};

export function createModelChoice(deps: { catalog: Catalog; customModel: string }) {
  const { catalog } = deps;

  /** The models `actor` may run now: allowed by the plan, served by a configured provider. */
  const runnable = (actor: Pick<AiActor, 'plan' | 'isAdmin'>): CatalogModel[] => {
    const allowed = allowedModelIds(actor, catalog.routerModels());
    return catalog.list().filter((m) => m.available && (allowed === null || allowed.includes(m.id)));
  };

  const cannotRun = (name: string, reason: string, models: CatalogModel[]) =>
    new AppError(
      'MODEL_CANNOT_RUN',
      models.length > 0
        ? `Model ${name} cannot run: ${reason}. Models that can run: ${models.map((m) => m.id).join(', ')}.`
        : `Model ${name} cannot run: ${reason}, and no model can run until the operator configures a model provider (ROUTER_API_KEY or a provider key).`,
      { models: models.map((m) => m.id) },
    );

  return {
    runnable,

    /**
     * The id an agent of `actor` runs for the name asked (provisioning, a change of model): the
     * seed's names mapped as above; 400 MODEL_CANNOT_RUN with the models that can run otherwise.
     */
    choose(actor: Pick<AiActor, 'plan' | 'isAdmin'>, asked: string | undefined): string {
      const name = asked?.trim() || SPEC_DEFAULT_MODEL;
      const can = runnable(actor);
      const anyProvider = catalog.list().some((m) => m.available);
      const family = FAMILIES[name];
      if (name === 'custom') {
        const id = `custom/${deps.customModel}`;
        if (!anyProvider || can.some((m) => m.id === id)) return id;
        throw cannotRun(name, 'the custom provider (AI_CUSTOM_BASE_URL) is not configured', can);
      }
      if (family) {
        if (!anyProvider) return family[0]!;
        const best = family.find((id) => can.some((m) => m.id === id));
        if (best) return best;
        const fallback =
          selectModel(
            can.filter((m) => m.provider === 'router'),
            'general',
          ) ?? can[0];
        if (fallback) return fallback.id;
        throw cannotRun(name, 'your plan allows no model a configured provider serves', can);
      }
      const m = catalog.get(name);
      if (!anyProvider && m) return m.id;
      if (can.some((c) => c.id === name)) return name;
      if (!m) throw cannotRun(name, 'no configured provider serves a model of that name', can);
      if (!m.available) throw cannotRun(name, `its provider (${m.provider}) is not configured`, can);
      throw cannotRun(name, 'your plan does not include it', can);
    },
  };
}

export type ModelChoice = ReturnType<typeof createModelChoice>;

/**
 * The model choice for a platform user by id, their stored plan deciding (the admin rule over
 * their stored facts; no plan stored: `defaultPlan`): what provisioning, a change of model and the
 * model lists ask. The catalogue is refreshed first, so a model the router added can be chosen.
 */
export function createOwnerModels(deps: {
  ai: { modelChoice: ModelChoice; currentCatalog: () => Promise<unknown> };
  storedPlans: StoredPlans;
  config: Pick<Config, 'ADMIN_EMAILS' | 'ADMIN_EMAILS_REQUIRE_VERIFIED' | 'DEFAULT_PLAN'>;
}) {
  const { config } = deps;
  const choice = deps.ai.modelChoice;
  const isAdmin = (facts: Parameters<typeof isAdminUser>[1]) => isAdminUser(config, facts);
  const ownerOf = async (userId: string): Promise<Pick<AiActor, 'plan' | 'isAdmin'>> => {
    await deps.ai.currentCatalog();
    const stored = await deps.storedPlans.lookup(userId);
    const verdict = stored ? checkStoredPlan(stored, {}, { subscriptionsRequired: false, isAdminUser: isAdmin, userId }) : undefined;
    return verdict?.ok ? verdict.actor : { plan: config.DEFAULT_PLAN, isAdmin: false };
  };
  return {
    choose: async (userId: string, asked: string | undefined) => choice.choose(await ownerOf(userId), asked),
    runnable: async (userId: string) =>
      choice.runnable(await ownerOf(userId)).map((m) => ({ id: m.id, name: m.name, provider: m.provider })),
  };
}

/**
 * What an agent's runtime is given for its model (docs/agents.md "Model access", "Model"): the
 * gateway and its own platform key, never a provider key, and the model `default`, which the
 * gateway resolves at every call to the model the agent's record names (its `apk_` key carries
 * it): one truth, and a model changed on the Configuration tab applies at the next message, no
 * restart. No provider configured at all: no model access (the runtime answers 503).
 */
export function agentModelEnv(
  ai: { providers: Record<ProviderName, ChatProvider> },
  gatewayUrl: string,
  platformApiKey: string,
): Record<string, string> {
  const anyProvider = Object.values(ai.providers).some((p) => p.configured);
  return {
    ...(anyProvider ? { AGENT_MODEL_BASE_URL: gatewayUrl, AGENT_MODEL_API_KEY: platformApiKey } : {}),
    AGENT_MODEL: DEFAULT_MODEL_ALIAS,
  };
}
