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
import type { Db } from '../../db/client.ts';
import { AppError } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { budgetExceeded, formatUsd, round6 } from './agent-budgets.service.ts';
import { monthOf, type SpendHold, unitsToDecimal } from './ai.repo.ts';
import { createBalanceLeases } from './balance-leases.service.ts';
import type { CatalogModel } from './catalog.service.ts';
import { keyBudgetExceeded } from './key-budgets.service.ts';
import { type SpendHoldRow, spendHoldsRepo } from './spend-holds.repo.ts';
import type { UsageStore } from './usage-store.service.ts';

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

/** How long "this agent has no budget" is believed without asking (ms): the delay before a budget set in another replica applies. */
const NO_BUDGET_TTL_MS = 5_000;
/** Entries before a cache is emptied. */
const CACHE_MAX = 50_000;

/**
 * Who a model call is for: the owner, the agent when an agent makes it, and the API key it was
 * made for (docs/payments.md "API keys"; a key the caller checked is the owner's).
 */
export type SpendCaller = {
  userId: string;
  agentId?: string | null | undefined;
  keyId?: string | null | undefined;
  /**
   * The call is paid for another way (a paid gateway plugin's price, charged before it runs): its
   * budgets are held, never the balance, which would charge it twice.
   */
  prepaid?: boolean | undefined;
};

/**
 * The one check every model call passes before a provider is contacted (docs/agents.md "Usage and
 * budgets", docs/payments.md "Model calls from the balance" and "API keys"): its most possible cost
 * is held against each cap it is under — the agent's monthly budget, the API key's it was made for,
 * and with AI_BILLING=balance the owner's balance — in one statement, all or nothing. The holds go back with the call's usage
 * (usage-store.service.ts), whose write also pays the real cost from the balance.
 */
export function createSpendGuard(deps: {
  db: Pick<Db, 'pool'>;
  holds: Pick<SpendHolds, 'holder' | 'ttlMs' | 'taken'>;
  usage: Pick<UsageStore, 'written' | 'pendingAgentCost' | 'pendingKeyCost' | 'release'>;
  /** AI_BILLING=balance: the owner's wallet address (undefined: the user has none yet) */
  billing?: { addressOf(userId: string): Promise<string | undefined> } | undefined;
  now: () => Date;
}) {
  const { db, holds, usage, billing, now } = deps;
  /** agents known to have no budget, and since when */
  const noBudget = new Map<string, number>();
  /** API keys known to have no budget, and since when */
  const noKeyBudget = new Map<string, number>();
  const knownFree = (known: Map<string, number>, id: string | null | undefined) => {
    if (!id) return true;
    const at = known.get(id);
    return at !== undefined && Date.now() - at < NO_BUDGET_TTL_MS;
  };
  const remember = (known: Map<string, number>, id: string, free: boolean) => {
    if (!free) known.delete(id);
    else {
      if (known.size >= CACHE_MAX) known.clear();
      known.set(id, Date.now());
    }
  };
  /**
   * users' wallet addresses: an address, once a wallet exists, never changes; "no wallet yet" is
   * not kept (a credit creates one, and the next call must find it)
   */
  const wallets = new Map<string, string>();

  /**
   * Holds of billed calls whose agent and key are known to have no budget, per wallet and month:
   * one statement at a time, and the calls that arrive while it runs held together by the next,
   * for the sum of their holds (the balance admits a sum exactly as it admits its parts, so no call
   * is admitted that the balance cannot cover). Without it every concurrent call of a wallet waited
   * in turn for its row lock (docs/benchmarks.md "Billing"). A group the balance refuses is asked
   * again call by call, so each call is refused only on its own hold.
   */
  type Waiter = { units: number; done: (row: SpendHoldRow | undefined) => void; fail: (err: unknown) => void };
  const lanes = new Map<string, Waiter[]>();
  const drain = async (lane: string, queue: Waiter[], ask: (units: number) => Promise<SpendHoldRow>) => {
    while (queue.length > 0) {
      const group = queue.splice(0);
      try {
        const row = await ask(group.reduce((sum, w) => sum + w.units, 0));
        for (const w of group) w.done(row.refused === null || group.length === 1 ? row : undefined);
      } catch (err) {
        for (const w of group) w.fail(err);
      }
    }
    lanes.delete(lane);
  };
  const holdTogether = (lane: string, units: number, ask: (units: number) => Promise<SpendHoldRow>) =>
    new Promise<SpendHoldRow | undefined>((done, fail) => {
      const queue = lanes.get(lane);
      if (queue) {
        queue.push({ units, done, fail });
        return;
      }
      const fresh: Waiter[] = [{ units, done, fail }];
      lanes.set(lane, fresh);
      void drain(lane, fresh, ask);
    });

  /** `hold_spend` for `units` (1e-10 USD) under this process's holder */
  const holdStatement = (
    o: { agentId: string | null; keyId: string | null; userId: string | null; address: string | null; period: string },
    units: number,
  ) => spendHoldsRepo.hold(db.pool, { ...o, holder: holds.holder, amount: unitsToDecimal(units), ttlMs: holds.ttlMs });

  /** blocks of balances held ahead, for the calls of a wallet that no budget caps (balance-leases.service.ts) */
  const leases = billing
    ? createBalanceLeases({
        ask: async (scope, period, units) => {
          const row = await holdStatement(
            { agentId: null, keyId: null, userId: null, address: scope.slice('balance:'.length), period },
            units,
          );
          return row.refused === null;
        },
        holds,
        release: (held) => usage.release(held),
      })
    : undefined;

  const addressOf = async (userId: string): Promise<string | null> => {
    const hit = wallets.get(userId);
    if (hit) return hit;
    const address = (await billing!.addressOf(userId))?.toLowerCase();
    if (!address) return null;
    if (wallets.size >= CACHE_MAX) wallets.clear();
    wallets.set(userId, address);
    return address;
  };

  const take = async (caller: SpendCaller, units: number): Promise<SpendHold[] | undefined> => {
    const agentId = caller.agentId ?? null;
    const keyId = caller.keyId ?? null;
    const fromBalance = billing !== undefined && caller.prepaid !== true;
    const address = fromBalance ? await addressOf(caller.userId) : null;
    if (fromBalance && !address) throw balanceTooLow(0, units / 1e10, 0);
    const agentScope = agentId ? `agent:${agentId}` : undefined;
    const keyScope = keyId ? `key:${keyId}` : undefined;
    const balanceScope = address ? `balance:${address}` : undefined;
    const period = monthOf(now());
    const ask = (amount: number) => holdStatement({ agentId, keyId, userId: caller.userId, address, period }, amount);
    const attempt = () => ask(units);
    const together = address !== null && knownFree(noBudget, agentId) && knownFree(noKeyBudget, keyId);
    if (together && leases) {
      const leased = await leases.take(balanceScope!, period, units);
      if (leased) return leased;
    }
    let row =
      (together ? await holdTogether(`${caller.userId}\u0000${agentId}\u0000${keyId}\u0000${period}`, units, ask) : undefined) ??
      (await attempt());
    if (row.refused !== null) {
      // ended calls of these caps whose holds still wait in the usage window count as what they
      // held, more than they cost: a refusal is asked again once they are written, so a call is
      // refused on what the others cost. Not waited for before the first try: with billing on, every
      // call of a wallet would wait for the usage write of the one before it (docs/benchmarks.md "Billing")
      const pending = [
        agentScope && usage.written(agentScope),
        keyScope && usage.written(keyScope),
        balanceScope && usage.written(balanceScope),
      ].filter(Boolean);
      if (pending.length > 0) {
        await Promise.all(pending);
        row = await attempt();
      }
    }
    // a refusal by the agent's budget is answered before the key's is read: only a null that was asked means "none"
    if (agentId) remember(noBudget, agentId, row.budget === null);
    if (keyId && row.refused !== 'budget') remember(noKeyBudget, keyId, row.key_budget === null);
    if (row.refused === 'budget') {
      throw budgetExceeded(Number(row.budget), round6(Number(row.spent) + usage.pendingAgentCost(agentId!, period)), period);
    }
    if (row.refused === 'key') {
      throw keyBudgetExceeded(Number(row.key_budget), round6(Number(row.key_spent) + usage.pendingKeyCost(keyId!, period)), period);
    }
    if (row.refused === 'balance') throw balanceTooLow(Number(row.balance_micros) / 1e6, units / 1e10, Number(row.balance_held));
    const taken: SpendHold[] = [];
    if (agentScope && row.budget !== null) taken.push({ scope: agentScope, period, units });
    if (keyScope && row.key_budget !== null) taken.push({ scope: keyScope, period, units });
    if (balanceScope) taken.push({ scope: balanceScope, period, units });
    for (const h of taken) holds.taken(h);
    return taken.length > 0 ? taken : undefined;
  };

  return {
    /** Whether model calls are paid from the balance (AI_BILLING=balance). */
    billing: billing !== undefined,

    /**
     * Holds the call's most possible cost (`units()`, 1e-10 USD, asked only when there is a cap)
     * against every cap the caller is under; resolves to the holds to give back with the call's
     * usage (undefined: nothing capped it). Rejects with AGENT_BUDGET_EXCEEDED (429),
     * KEY_BUDGET_EXCEEDED (402) or BALANCE_TOO_LOW (402). Undefined, not a promise, when nothing
     * can cap the call: billing off, and neither an agent nor a key that may have a budget (an
     * agent and a key known to have none: the common call, for which the gateway waits for nothing
     * and estimates nothing, docs/benchmarks.md "AI proxy").
     */
    hold(caller: SpendCaller, units: () => number): Promise<SpendHold[] | undefined> | undefined {
      if ((!billing || caller.prepaid) && knownFree(noBudget, caller.agentId) && knownFree(noKeyBudget, caller.keyId)) return undefined;
      return take(caller, units());
    },

    /** Gives the unspent blocks of balances back (before the usage store's last write). */
    close(): void {
      leases?.close();
    },

    /** An agent's budget changed in this process: ask the database on its next call. */
    forget(agentId: string): void {
      noBudget.delete(agentId);
    },
  };
}

export type SpendGuard = ReturnType<typeof createSpendGuard>;

/** The refusal of a call the owner's balance cannot cover: 402 with what it holds and what the call would hold. */
const balanceTooLow = (balanceUsd: number, holdUsd: number, heldUsd: number) =>
  new AppError(
    'BALANCE_TOO_LOW',
    balanceUsd <= 0 && heldUsd <= 0
      ? `Model calls are paid from your balance, which is empty: this call would hold up to ${formatUsd(holdUsd)}. ` +
          'Add credit on the Wallet page (or ask an admin for credit).'
      : `Your balance of ${formatUsd(balanceUsd)} cannot cover this call: it would hold up to ${formatUsd(holdUsd)} ` +
          `(its prompt and max_tokens at the model's price)${heldUsd > 0 ? `, and calls in flight hold ${formatUsd(heldUsd)}` : ''}. ` +
          'Add credit on the Wallet page, or ask for fewer tokens (max_tokens).',
    { balanceUsd, holdUsd: round6(holdUsd), heldUsd: round6(heldUsd) },
  );

/**
 * The most a call can cost, in 1e-10 USD units, at the dearest model it may fall back to: the
 * prompt at about 3 characters a token (fewer than the 4 usage estimates use, so the hold is not
 * short for dense text), plus its output limit (`max_tokens`, else what the model's context
 * window leaves after the prompt, at least LIMITS.aiHoldMinOutputTokens).
 */
export function mostCost(attempts: readonly CatalogModel[], messages: unknown, maxTokens: number | undefined): number {
  const prompt = Math.ceil(JSON.stringify(messages).length / 3);
  let most = 0;
  for (const m of attempts) {
    const output = maxTokens ?? Math.max(m.contextWindow - prompt, LIMITS.aiHoldMinOutputTokens);
    most = Math.max(most, prompt * m.inputCost + output * m.outputCost);
  }
  return Math.ceil(most * 1e10);
}
