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

  /** Per-IP fixed window; a limiter outage lets traffic through rather than failing every request. */
  async function limit(key: string, max: number, windowMs: number): Promise<void> {
    let decision: Awaited<ReturnType<typeof deps.rateLimiter.consume>>;
    try {
      decision = await deps.rateLimiter.consume(key, max, windowMs);
    } catch (err) {
      logger?.warn({ err }, 'rate limiter unavailable; request allowed');
      return;
    }
    if (!decision.allowed)
      throw new AppError('AI_RATE_LIMITED', 'Too many requests', { retryAfter: Math.max(1, Math.ceil(decision.retryAfterMs / 1000)) });
  }

  async function enforceQuota(actor: AiActor): Promise<void> {
    if (!config.AI_QUOTA_ENFORCE) return;
    const quota = monthlyQuota(actor);
    if (!Number.isFinite(quota)) return;
    const used = await usage.monthlyTokens(actor.userId, now());
    if (used >= quota) throw new AppError('QUOTA_EXCEEDED', 'Monthly token quota exceeded', { quota, used });
  }

  return { limit, enforceQuota };
}
