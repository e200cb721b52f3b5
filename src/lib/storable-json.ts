/**
 * §4.2 "not serializable", the one bound every stored configuration passes: POST /api/config
 * (src/domains/agent-config/agent-config.service.ts) and an agent's own configuration (the web and
 * backend agent routes, through `configObject` in src/domains/agents/agents.schemas.ts).
 * PostgreSQL's jsonb refuses what is caught here (NUL, unpaired surrogates, very deep nesting), so
 * without it those bodies were 500s (§7: 4xx). Callers pass the depth (LIMITS.configMaxDepth).
 */
import { badRequest } from './errors.ts';
import { hasUnstorableText } from './unstorable-text.ts';

/** A configuration object (§2): what `agent_configs.config`, `config_backups.config` and `agents.config` hold. */
export type JsonObject = Record<string, unknown>;

/**
 * Walks the value iteratively (a hostile body must not blow the stack): too deep, or a key or
 * string jsonb refuses. The strings are tested as they are, not in JSON text, because
 * JSON.stringify writes an unpaired surrogate as a `\udXXX` escape that jsonb refuses later.
 */
function unstorable(value: unknown, maxDepth: number): 'depth' | 'text' | undefined {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (typeof v === 'string') {
      if (hasUnstorableText(v)) return 'text';
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (d > maxDepth) return 'depth';
    for (const [k, child] of Object.entries(v as object)) {
      if (hasUnstorableText(k)) return 'text';
      stack.push([child, d + 1]);
    }
  }
  return undefined;
}

/**
 * `{problem}`: why `config` cannot be stored as it is; `{json}`: its JSON text when it can. Schemas
 * report the problem as a validation issue, services throw it (`checkSerializable`).
 */
export function serializableProblem(config: JsonObject, maxDepth: number): { problem: string } | { json: string } {
  const bad = unstorable(config, maxDepth);
  if (bad === 'depth') return { problem: `Config is not serializable: nested deeper than ${maxDepth} levels` };
  if (bad === 'text') return { problem: 'Config is not serializable: contains a NUL character or an unpaired surrogate' };
  try {
    return { json: JSON.stringify(config) };
  } catch {
    return { problem: 'Config is not serializable' };
  }
}

/** The JSON object to store (what survives serialization), or a 400 with the reason. */
export function checkSerializable(config: JsonObject, maxDepth: number): JsonObject {
  const r = serializableProblem(config, maxDepth);
  if ('problem' in r) throw badRequest(r.problem);
  return JSON.parse(r.json) as JsonObject;
}
