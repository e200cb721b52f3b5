/**
 * The AI layer's limits: per-IP fixed windows (§8 AI_RATE_LIMIT, §4.10 DEMO_RATE_LIMIT) and the
 * monthly token quota per plan (§4.9, when AI_QUOTA_ENFORCE is on). Part of the AI layer.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config/env.ts';
import { AppError } from '../../lib/errors.ts';
import type { RateLimiter } from '../../lib/rate-limiter.ts';
import { type AiActor, monthlyQuota } from './plan-rules.ts';
import type { UsageStore } from './usage.ts';

export function createAiLimits(deps: {
  config: Pick<Config, 'AI_QUOTA_ENFORCE'>;
  rateLimiter: RateLimiter;
  usage: UsageStore;
  now: () => Date;
  logger?: FastifyBaseLogger | undefined;
}) {
  const { config, usage, now, logger } = deps;

  /**
   * Per-IP fixed window; a limiter outage lets traffic through rather than failing every request.
   * One promise (the limiter's) and its continuation, not an async wrapper around it: every AI
   * request passes here (docs/benchmarks.md "AI proxy").
   */
  function limit(key: string, max: number, windowMs: number): Promise<void> {
    return deps.rateLimiter.consume(key, max, windowMs).then(
      (decision) => {
        if (!decision.allowed)
          throw new AppError('AI_RATE_LIMITED', 'Too many requests', { retryAfter: Math.max(1, Math.ceil(decision.retryAfterMs / 1000)) });
      },
      (err: unknown) => {
        logger?.warn({ err }, 'rate limiter unavailable; request allowed');
      },
    );
  }

  /** Whether enforceQuota has anything to check for `actor` (callers skip its promise when not). */
  const quotaApplies = (actor: AiActor) => config.AI_QUOTA_ENFORCE && Number.isFinite(monthlyQuota(actor));

  async function enforceQuota(actor: AiActor): Promise<void> {
    if (!quotaApplies(actor)) return;
    const quota = monthlyQuota(actor);
    const used = await usage.monthlyTokens(actor.userId, now());
    if (used >= quota) throw new AppError('QUOTA_EXCEEDED', 'Monthly token quota exceeded', { quota, used });
  }

  return { limit, quotaApplies, enforceQuota };
}
