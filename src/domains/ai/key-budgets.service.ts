/**
 * API keys' monthly budgets, on the AI layer's side (docs/payments.md "API keys"). A key's budget
 * is a cap like an agent's: the model calls made for the key hold their most possible cost against
 * it in the one hold statement (`hold_spend`, migration 240, through the spend guard), and their
 * real cost is written to the key's monthly rollup with their usage rows. This file is what is
 * around that: whether a key id the model gateway is told about is the calling agent's owner's
 * (otherwise it is ignored), the agent proxy's check before it forwards a key's request, and the
 * refusal's sentence. The owner's side (setting the budget) is the keys domain's.
 */
import type { Pool } from 'pg';
import { AppError } from '../../lib/errors.ts';
import { UUID_PATTERN } from '../../lib/ids.ts';
import { formatUsd, round6 } from './agent-budgets.service.ts';
import { monthOf } from './ai.repo.ts';
import { spendHoldsRepo } from './spend-holds.repo.ts';
import type { UsageStore } from './usage-store.service.ts';

/** The refusal of a call for a key whose month's cost and calls in flight reached its budget: 402, with what to do. */
export const keyBudgetExceeded = (budget: number, spent: number, periodStart: string, heldUsd = 0) =>
  new AppError(
    'KEY_BUDGET_EXCEEDED',
    `This API key's monthly budget of ${formatUsd(budget)} is used up (${formatUsd(spent)} spent since ${periodStart}` +
      `${heldUsd > 0 ? `, and calls in flight hold ${formatUsd(heldUsd)}` : ''}). Raise it on the Keys page, or use another key.`,
    { monthlyBudgetUsd: budget, monthToDateUsd: spent, periodStart },
  );

/** How long a key's owner is believed without asking (ms): an owner never changes; a deleted key's calls are attributed to it this long at most. */
const OWNER_TTL_MS = 60_000;
/** How long "no such key" is believed (ms): a key created meanwhile is known within this. */
const UNKNOWN_TTL_MS = 5_000;
const CACHE_MAX = 50_000;

export function createKeyBudgets(deps: {
  pool: Pool;
  usage: Pick<UsageStore, 'pendingKeyCost'>;
  /** how long a hold counts without renewal (the spend holds' TTL) */
  holdTtlMs: number;
  now: () => Date;
}) {
  const owners = new Map<string, { userId: string | null; at: number }>();

  return {
    /**
     * `keyId` when it names one of `userId`'s API keys, else undefined: the model gateway charges a
     * call to a key only then, so an agent that names a key can at most misattribute its own
     * owner's spend among that owner's keys. Answers at once (no promise) once the key is known.
     */
    ofOwner(userId: string, keyId: string): string | undefined | Promise<string | undefined> {
      if (!UUID_PATTERN.test(keyId)) return undefined;
      const hit = owners.get(keyId);
      const t = Date.now();
      if (hit && t - hit.at < (hit.userId ? OWNER_TTL_MS : UNKNOWN_TTL_MS)) return hit.userId === userId ? keyId : undefined;
      return spendHoldsRepo.keyOwner(deps.pool, keyId).then((row) => {
        if (owners.size >= CACHE_MAX) owners.clear();
        owners.set(keyId, { userId: row?.user_id ?? null, at: t });
        return row?.user_id === userId ? keyId : undefined;
      });
    },

    /**
     * The agent proxy's check before a key with a budget reaches an agent: rejects with 402
     * KEY_BUDGET_EXCEEDED once the key's month's cost plus the holds of its calls in flight reached
     * the budget (compared as the hold statement compares them). The model calls themselves are
     * held again by the gateway; this refuses a spent key whatever runtime the agent runs.
     */
    async check(userId: string, keyId: string): Promise<void> {
      const period = monthOf(deps.now());
      const row = await spendHoldsRepo.keyState(deps.pool, { keyId, userId, period, ttlMs: deps.holdTtlMs });
      if (!row || row.budget === null) return;
      const budget = Number(row.budget);
      const spent = Number(row.spent);
      const held = Number(row.held);
      if (round6(spent + held) >= budget)
        throw keyBudgetExceeded(budget, round6(spent + deps.usage.pendingKeyCost(keyId, period)), period, held);
    },
  };
}
