/** Request fields shared by the backend and web agent APIs (§4.7, §8 agent name). */
import { z } from 'zod';
import { LIMITS } from '../../config/limits.ts';
import { configValue } from '../../lib/agent-config.ts';
import { serializableProblem } from '../../lib/storable-json.ts';

/** §8: 1 to 64 characters after trim. */
export const agentName = z
  .string({ error: 'Name required' })
  .trim()
  .min(LIMITS.agentNameMin, { error: 'Name required' })
  .max(LIMITS.agentNameMax, { error: `Name must be at most ${LIMITS.agentNameMax} characters` });

/**
 * The persona keys of a configuration (docs/agents.md "Persona"), which the runtime sends to the
 * model as they are: each a string up to its limit, or null / empty (no prompt of ours).
 */
const PROMPTS: { path: string; max: number }[] = [
  { path: 'systemPrompt', max: LIMITS.agentSystemPromptMax },
  { path: 'agents.defaults.heartbeat.prompt', max: LIMITS.agentHeartbeatPromptMax },
];

/** Why a persona key of `config` cannot be stored, or undefined. */
function promptProblem(config: Record<string, unknown>): string | undefined {
  for (const { path, max } of PROMPTS) {
    const v = configValue(config, path);
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') return `${path} must be a string (or null to clear it)`;
    if (v.length > max) return `${path} must be at most ${max} characters`;
  }
  return undefined;
}

/**
 * An agent configuration: any JSON object (§2 configuration table) that can be stored, under the
 * same bound as POST /api/config (nesting depth, NUL, unpaired surrogates), with the persona keys
 * checked: 400, never a 500.
 */
export const configObject = z.record(z.string(), z.unknown(), { error: 'config must be an object' }).superRefine((config, ctx) => {
  const r = serializableProblem(config, LIMITS.configMaxDepth);
  if ('problem' in r) ctx.addIssue({ code: 'custom', message: r.problem });
  else {
    const problem = promptProblem(config);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }
});

/**
 * Provisioning's `gitInit` (docs/agents.md "A repository from the start"): false by default, so a
 * request shaped as §4.7 and §4.18 give it provisions what it always did.
 */
export const gitInitField = z
  .boolean({ error: 'gitInit must be true or false' })
  .optional()
  .describe(
    'true: the new workspace starts as a git repository (branch `main`, the .gitignore of POST /api/browse/git-init) with a first commit by the platform, made as the agent in its sandbox; default false. 503 `GIT_UNAVAILABLE` where git cannot run sandboxed (no bubblewrap, or no workspace on this machine)',
  );
