/**
 * §4.2 "not serializable", the one bound every stored configuration passes: POST /api/config
 * (config.service.ts) and an agent's own configuration (the web and backend agent routes, through
 * `configObject` in ../agents/agents.schemas.ts). PostgreSQL's jsonb refuses what is caught here
 * (NUL, unpaired surrogates, very deep nesting), so without it those bodies were 500s (§7: 4xx).
 */
import { LIMITS } from '../../config/limits.ts';
import { badRequest } from '../../lib/errors.ts';
import { hasUnstorableText } from '../../lib/unstorable-text.ts';
import type { JsonObject } from './config.types.ts';

/**
 * Walks the value iteratively (a hostile body must not blow the stack): too deep, or a key or
 * string jsonb refuses. The strings are tested as they are, not in JSON text, because
 * JSON.stringify writes an unpaired surrogate as a `\udXXX` escape that jsonb refuses later.
 */
function unstorable(value: unknown): 'depth' | 'text' | undefined {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (typeof v === 'string') {
      if (hasUnstorableText(v)) return 'text';
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (d > LIMITS.configMaxDepth) return 'depth';
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
export function serializableProblem(config: JsonObject): { problem: string } | { json: string } {
  const bad = unstorable(config);
  if (bad === 'depth') return { problem: `Config is not serializable: nested deeper than ${LIMITS.configMaxDepth} levels` };
  if (bad === 'text') return { problem: 'Config is not serializable: contains a NUL character or an unpaired surrogate' };
  try {
    return { json: JSON.stringify(config) };
  } catch {
    return { problem: 'Config is not serializable' };
  }
}

/** The JSON object to store (what survives serialization), or a 400 with the reason. */
export function checkSerializable(config: JsonObject): JsonObject {
  const r = serializableProblem(config);
  if ('problem' in r) throw badRequest(r.problem);
  return JSON.parse(r.json) as JsonObject;
}
