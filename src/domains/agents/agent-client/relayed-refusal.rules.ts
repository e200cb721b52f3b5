/**
 * What an agent's refusal means on the platform (./agent.client.ts reads it from the agent's
 * answers: a WebSocket error frame, an OpenAI-shaped error body).
 */
import type { WordedCode } from '../../../lib/error-codes.ts';
import { AppError } from '../../../lib/errors.ts';

/**
 * The refusals an agent passes on from the platform's AI gateway (docs/agents.md "Model access"),
 * or makes itself (`AGENT_BUSY`), by the code of its error: the platform answers them with the
 * status the agent's own route gives them (403, 429, 402), not as a failure of the agent. The code
 * is mapped to the catalogue, never taken as a status, so an agent cannot make the platform answer
 * anything else. Any other error of the agent stays a 5xx.
 */
const RELAYED_REFUSALS: Readonly<Record<string, WordedCode>> = {
  model_restricted: 'MODEL_RESTRICTED',
  budget_exceeded: 'AGENT_BUDGET_EXCEEDED',
  insufficient_quota: 'QUOTA_EXCEEDED',
  rate_limit_exceeded: 'AI_RATE_LIMITED',
  subscription_required: 'SUBSCRIPTION_REQUIRED',
  AGENT_BUSY: 'TOO_MANY_REQUESTS',
};
/** How many allowed models a relayed `model_restricted` names at most (a plan has a handful). */
const RELAYED_MODELS_MAX = 200;

export type RefusalDetails = { code?: unknown; allowedModels?: unknown; retryAfter?: unknown };

/** The agent's refusal (`message`, cut to 500 characters) as the platform's error; undefined when its code names none. */
export function relayedRefusal(message: string, details: RefusalDetails): AppError | undefined {
  const code =
    typeof details.code === 'string' && Object.hasOwn(RELAYED_REFUSALS, details.code) ? RELAYED_REFUSALS[details.code] : undefined;
  if (!code) return undefined;
  const extra: Record<string, unknown> = {};
  const models = details.allowedModels;
  if (code === 'MODEL_RESTRICTED' && Array.isArray(models) && models.every((m) => typeof m === 'string'))
    extra.allowedModels = models.slice(0, RELAYED_MODELS_MAX);
  const retryAfter = Number(details.retryAfter);
  if (details.retryAfter !== undefined && Number.isFinite(retryAfter) && retryAfter > 0)
    extra.retryAfter = Math.min(3600, Math.ceil(retryAfter));
  return new AppError(code, message.slice(0, 500), Object.keys(extra).length > 0 ? extra : undefined);
}
