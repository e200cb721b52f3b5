/**
 * Stored plans for the AI plan middleware (§4.9 with issue "payments" item 2): when `x-user-id`
 * names a platform user, their plan and subscription status come from PostgreSQL. Looked up on
 * the owner connection (the backend acts for the user with the internal key) and cached per
 * process for a few seconds, so an AI call costs no extra query in the common case; a plan change
 * (webhook, admin) applies within `ttlMs`.
 */

import type { Db } from '../../db/client.ts';
import { UUID_PATTERN } from '../../lib/ids.ts';
import { aiRepo } from './ai.repo.ts';
import type { StoredPlan } from './plan.rules.ts';

export type StoredPlans = {
  lookup(userId: string | undefined): Promise<StoredPlan | null>;
  /**
   * What `lookup` would answer, when that needs no query (not a user id, or cached): lets the plan
   * middleware decide without a promise on the common path; undefined when only `lookup` can tell.
   */
  peek(userId: string | undefined): StoredPlan | null | undefined;
};

export function createStoredPlans(deps: { db: Db; ttlMs?: number; now?: () => number }): StoredPlans {
  const ttlMs = deps.ttlMs ?? 5_000;
  const now = deps.now ?? Date.now;
  const cache = new Map<string, { value: StoredPlan | null; until: number }>();
  const peek = (userId: string | undefined): StoredPlan | null | undefined => {
    if (!userId) return null;
    // only ids that passed the test below are cached: a hit (every call but the first few) skips the
    // regular expression, which showed in the AI gateway's profile (docs/benchmarks.md "AI proxy", round 7)
    const hit = cache.get(userId);
    if (hit) return hit.until > now() ? hit.value : undefined;
    // `anonymous`, `demo` and other non-user ids never reach the database
    return UUID_PATTERN.test(userId) ? undefined : null;
  };
  return {
    peek,
    async lookup(userId) {
      const known = peek(userId);
      if (known !== undefined || !userId) return known ?? null;
      const value = await aiRepo.storedPlan(deps.db.kysely, userId.toLowerCase());
      if (cache.size > 10_000) cache.clear(); // bounded: ids come from callers holding the internal key
      cache.set(userId, { value, until: now() + ttlMs });
      return value;
    },
  };
}
