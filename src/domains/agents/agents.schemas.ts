/** Request fields shared by the backend and web agent APIs (§4.7, §8 agent name). */
import { z } from 'zod';
import { LIMITS } from '../../config/limits.ts';
import { serializableProblem } from '../config/config.serializable.ts';

/** §8: 1 to 64 characters after trim. */
export const agentName = z
  .string({ error: 'Name required' })
  .trim()
  .min(LIMITS.agentNameMin, { error: 'Name required' })
  .max(LIMITS.agentNameMax, { error: `Name must be at most ${LIMITS.agentNameMax} characters` });

/**
 * An agent configuration: any JSON object (§2 configuration table) that can be stored, under the
 * same bound as POST /api/config (nesting depth, NUL, unpaired surrogates): 400, never a 500.
 */
export const configObject = z.record(z.string(), z.unknown(), { error: 'config must be an object' }).superRefine((config, ctx) => {
  const r = serializableProblem(config);
  if ('problem' in r) ctx.addIssue({ code: 'custom', message: r.problem });
});
