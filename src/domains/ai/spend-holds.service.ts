/**
 * Spend holds (migration 205; docs/agents.md "Usage and budgets"): before a model call starts, the
 * most it can cost is held against the caps that apply to it, so concurrent calls overshoot a cap
 * by at most one call's hold. The usage writer takes a hold away in the same statement that adds
 * the call's real cost (usage.ts), and a call that ends without usage gives its hold back there too.
 *
 * This process's holds live in one row per cap and month under a random holder id; the rows keep
 * counting while this process renews them, and lapse LIMITS.spendHoldTtlMs after it stops (a
 * crash), so a dead process never keeps a budget blocked.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { LIMITS } from '../../config/limits.ts';
import type { Logger } from '../../lib/logger.ts';
import type { SpendHold } from './ai.repo.ts';
import { spendHoldsRepo } from './spend-holds.repo.ts';

export type SpendHolds = {
  /** this process's holder id (the usage writer releases under it) */
  readonly holder: string;
  readonly ttlMs: number;
  /** a hold the database granted: renewed from now on until it is released */
  taken(hold: SpendHold): void;
  /** holds the usage writer has released in the database */
  released(holds: Iterable<SpendHold>): void;
  close(): void;
};

export function createSpendHolds(deps: { pool: Pool; logger?: Logger | undefined; ttlMs?: number }): SpendHolds {
  const ttlMs = deps.ttlMs ?? LIMITS.spendHoldTtlMs;
  const holder = randomUUID();
  /** units held per scope and period and not yet released */
  const outstanding = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let lastPurge = 0;

  const tick = () => {
    const purge = Date.now() - lastPurge > ttlMs;
    if (purge) lastPurge = Date.now();
    spendHoldsRepo
      .renew(deps.pool, holder)
      .then(() => (purge ? spendHoldsRepo.purge(deps.pool, holder, ttlMs) : undefined))
      .catch((err: unknown) => deps.logger?.warn({ err: (err as Error).message }, 'spend holds: renewal failed'));
    if (outstanding.size === 0) stop();
  };
  const stop = () => {
    if (timer) clearInterval(timer);
    timer = undefined;
  };

  return {
    holder,
    ttlMs,
    taken(hold) {
      const key = `${hold.scope}\u0000${hold.period}`;
      outstanding.set(key, (outstanding.get(key) ?? 0) + hold.units);
      if (!timer) {
        timer = setInterval(tick, Math.floor(ttlMs / 3));
        timer.unref();
      }
    },
    released(holds) {
      for (const h of holds) {
        const key = `${h.scope}\u0000${h.period}`;
        const left = (outstanding.get(key) ?? 0) - h.units;
        if (left > 0) outstanding.set(key, left);
        else outstanding.delete(key);
      }
    },
    close: stop,
  };
}
