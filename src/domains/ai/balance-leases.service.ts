/**
 * Blocks of a balance held ahead by this process (docs/payments.md "Model calls from the balance"),
 * so that the calls of one wallet do not each wait for a hold statement under the wallet's row lock
 * (docs/benchmarks.md "Billing": 16 calls at once of one wallet queued behind each other's).
 *
 * A block is an ordinary hold in the database: `hold_spend` for the sum of BLOCK_CALLS calls' most
 * possible cost, on the balance only, under this process's holder, renewed and lapsing like every
 * hold. A call whose agent and key are known to have no budget (the spend guard decides) takes its
 * own most possible cost out of the block in memory, and from then on is a hold like any other: the
 * usage write releases it from the same row and pays the real cost. So the balance can never pay
 * more than it holds, and a call is still admitted only on what the database granted.
 *
 * The next block is asked for when half of one is left, so calls do not wait for it.
 *
 * What a block changes for others: up to one and a half blocks per wallet and process are held and
 * not yet spent, so near an empty balance another process's call may be refused while this one's
 * block is unspent. A block is small (BLOCK_CALLS calls' holds), is given back after IDLE_MS without a call
 * and when the process closes, and a call the block cannot cover and the balance refuses a new
 * block for is asked for on its own (the guard's exact path), which counts the given-back
 * remainder once the usage write has released it.
 */
import type { SpendHold } from './ai.repo.ts';
import type { SpendHolds } from './spend-holds.service.ts';

/** How many calls' holds one block covers. */
const BLOCK_CALLS = 16;
/** A block unused this long (ms) is given back. */
const IDLE_MS = 1_000;
/** After a refused block, how long (ms) the wallet's calls go the exact way without asking for one. */
const REFUSED_MS = 1_000;

type Lease = {
  period: string;
  /** units of the block not yet taken by a call */
  free: number;
  /** the block being asked for, when one is */
  refill?: Promise<boolean> | undefined;
  lastUse: number;
  idle?: NodeJS.Timeout | undefined;
  /** no block is asked for before this time (the last one was refused) */
  noneUntil: number;
};

export function createBalanceLeases(deps: {
  /** holds `units` on the balance `scope` names, for the month `period`; true when the database granted it */
  ask: (scope: string, period: string, units: number) => Promise<boolean>;
  holds: Pick<SpendHolds, 'taken'>;
  /** gives held units back (the usage write releases them in the database) */
  release: (holds: readonly SpendHold[]) => void;
}) {
  const leases = new Map<string, Lease>();

  const giveBack = (scope: string, lease: Lease) => {
    if (lease.idle) clearTimeout(lease.idle);
    lease.idle = undefined;
    if (lease.free > 0) deps.release([{ scope, period: lease.period, units: lease.free }]);
    lease.free = 0;
  };

  const watchIdle = (scope: string, lease: Lease) => {
    if (lease.idle) return;
    const check = () => {
      const left = lease.lastUse + IDLE_MS - Date.now();
      if (left > 0) {
        lease.idle = setTimeout(check, left).unref();
        return;
      }
      giveBack(scope, lease);
      if (!lease.refill && leases.get(scope) === lease) leases.delete(scope);
    };
    lease.idle = setTimeout(check, IDLE_MS).unref();
  };

  async function refill(scope: string, lease: Lease, units: number): Promise<boolean> {
    const block = units * BLOCK_CALLS;
    const granted = await deps.ask(scope, lease.period, block);
    if (!granted) {
      lease.noneUntil = Date.now() + REFUSED_MS;
      return false;
    }
    deps.holds.taken({ scope, period: lease.period, units: block });
    lease.free += block;
    return true;
  }

  return {
    /**
     * The call's hold taken out of this process's block of the balance `scope` names, asking for a
     * block first when there is none or it cannot cover `units`; undefined when the balance refused
     * a block (the caller then asks for the call's own hold, and is refused on it if it must be).
     */
    async take(scope: string, period: string, units: number): Promise<SpendHold[] | undefined> {
      let lease = leases.get(scope);
      if (lease && lease.period !== period) {
        giveBack(scope, lease);
        lease = undefined;
      }
      if (!lease) {
        lease = { period, free: 0, lastUse: Date.now(), noneUntil: 0 };
        leases.set(scope, lease);
      }
      const current = lease;
      const refillNow = () =>
        (current.refill ??= refill(scope, current, units).finally(() => {
          current.refill = undefined;
        }));
      // a few rounds at most: calls that arrive during a refill share it, and may find it taken by the others
      for (let round = 0; round < 4; round++) {
        if (current.free >= units) {
          current.free -= units;
          current.lastUse = Date.now();
          watchIdle(scope, current);
          // half a block left: the next is asked for now, so the calls after these do not wait for it
          if (current.free < (units * BLOCK_CALLS) / 2 && !current.refill && Date.now() >= current.noneUntil) refillNow().catch(() => {});
          return [{ scope, period, units }];
        }
        if (Date.now() < current.noneUntil) return undefined;
        if (!(await refillNow())) return undefined;
      }
      return undefined;
    },

    /** Gives every block's unspent part back (the process is closing; the usage store writes it). */
    close(): void {
      for (const [scope, lease] of leases) giveBack(scope, lease);
      leases.clear();
    },
  };
}
