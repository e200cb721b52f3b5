/**
 * The model an agent's configuration names (docs/agents.md "Model"): the record's one model is also
 * the configuration's `agents.defaults.model`, so the Configuration tab, GET config and the runtime
 * read the same id. Pure functions over the stored JSON.
 */

/** §4.7's provisioning names, none an id a provider routes (src/domains/ai/model-choice.service.ts maps them). */
export const SEED_MODEL_NAMES = ['claude-opus-4-6', 'gpt-4', 'custom'] as const;

/** The model a configuration names (`agents.defaults.model`, else a top-level `model`), when it names one. */
export function configuredModel(config: Record<string, unknown> | undefined): string | undefined {
  const defaults = (config?.agents as { defaults?: { model?: unknown } } | undefined)?.defaults;
  const named = typeof defaults?.model === 'string' ? defaults.model : typeof config?.model === 'string' ? config.model : undefined;
  return named?.trim() ? named.trim() : undefined;
}

/** The configuration with its model set to the record's (`agents.defaults.model`; a top-level `model` too when it had one). */
export function withConfiguredModel(config: Record<string, unknown>, model: string): Record<string, unknown> {
  const agents = (typeof config.agents === 'object' && config.agents !== null ? config.agents : {}) as Record<string, unknown>;
  const defaults = (typeof agents.defaults === 'object' && agents.defaults !== null ? agents.defaults : {}) as Record<string, unknown>;
  return { ...config, ...(typeof config.model === 'string' ? { model } : {}), agents: { ...agents, defaults: { ...defaults, model } } };
}
