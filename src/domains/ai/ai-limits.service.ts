/**
 * The AI layer's limits: per-IP fixed windows (§8 AI_RATE_LIMIT, §4.10 DEMO_RATE_LIMIT) and the
 * monthly token quota per plan (§4.9, when AI_QUOTA_ENFORCE is on). Part of the AI layer.
 */

import type { Config } from '../../config/env.ts';
import { AppError } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import type { RateDecision, RateLimiter } from '../../lib/rate-limiter.ts';
import { type AiActor, monthlyQuota } from './plan.rules.ts';
import type { UsageStore } from './usage-store.service.ts';

/** A limit's verdict: undefined (allowed now), the 429 (refused now), or a promise (the shared limiter decides; rejects with the 429). */
export type LimitVerdict = undefined | AppError | Promise<void>;

/** Calls `done` with a verdict's outcome, without a promise where the verdict is already known (the AI routes' callback hooks). */
export function settleVerdict(verdict: LimitVerdict, done: (err?: Error) => void): void {
  if (verdict === undefined || verdict instanceof AppError) done(verdict);
  else verdict.then(() => done(), done);
}

export function createAiLimits(deps: {
  config: Pick<Config, 'AI_QUOTA_ENFORCE'>;
  rateLimiter: RateLimiter;
  usage: UsageStore;
  now: () => Date;
  logger?: Logger | undefined;
}) {
  const { config, usage, now, logger } = deps;

  const refused = (decision: RateDecision) =>
    decision.allowed
      ? undefined
      : new AppError('AI_RATE_LIMITED', 'Too many requests', { retryAfter: Math.max(1, Math.ceil(decision.retryAfterMs / 1000)) });

  /**
   * Per-IP fixed window; a limiter outage lets traffic through rather than failing every request.
   * One promise (the limiter's) and its continuation, not an async wrapper around it.
   */
  function limit(key: string, max: number, windowMs: number): Promise<void> {
    return deps.rateLimiter.consume(key, max, windowMs).then(
      (decision) => {
        const error = refused(decision);
        if (error) throw error;
      },
      (err: unknown) => {
        logger?.warn({ err }, 'rate limiter unavailable; request allowed');
      },
    );
  }

  /**
   * `limit` for the hooks every proxied model call passes (docs/benchmarks.md "AI proxy"): decided
   * at once where the limiter's counters are in this process — undefined (allowed) or the 429 —
   * and a promise only where they are shared (Redis).
   */
  function limitNow(key: string, max: number, windowMs: number): LimitVerdict {
    const decision = deps.rateLimiter.consumeNow?.(key, max, windowMs);
    return decision ? refused(decision) : limit(key, max, windowMs);
  }

  /** Whether enforceQuota has anything to check for `actor` (callers skip its promise when not). */
  const quotaApplies = (actor: AiActor) => config.AI_QUOTA_ENFORCE && Number.isFinite(monthlyQuota(actor));

  async function enforceQuota(actor: AiActor): Promise<void> {
    if (!quotaApplies(actor)) return;
    const quota = monthlyQuota(actor);
    const used = await usage.monthlyTokens(actor.userId, now());
    if (used >= quota) throw new AppError('QUOTA_EXCEEDED', 'Monthly token quota exceeded', { quota, used });
  }

  return { limit, limitNow, quotaApplies, enforceQuota };
}
