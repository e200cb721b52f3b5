/**
 * Usage recording off the response path. Calls queue in memory and are written by one statement
 * per batch (usage rows + monthly rollups together, see ai.repo.ts). A batch is written at most
 * LIMITS.aiUsageFlushMs after its first call arrived, or at once when MAX_BATCH entries are waiting;
 * at most one batch is in flight. Why a window and not the next tick: at one request at a time a
 * write per request ran right beside the next request and added ~0.4 ms to it
 * (docs/benchmarks.md); in a window, requests share one statement, and most of a proxied request's
 * life is spent waiting for the provider, when a write costs it nothing.
 * Calls of one window with the same caller, agent, API key, model, provider and UTC day become one entry
 * (one ai_usage row with a request count, migration 200): a row per call cost PostgreSQL more CPU
 * per proxied call than the proxy's own code under load (docs/benchmarks.md "AI proxy", round 5),
 * and every report sums by day, model and agent, so nothing it shows changes. Tokens are summed as
 * integers and cost in integer 1e-10 USD (each call rounded once, as a row per call was), so sums
 * are exact.
 * Durability: `flush()`/`close()` write everything queued (shutdown loses nothing); a crash can
 * lose the calls of the last window. Quotas count queued entries (`monthlyTokens`), so the window
 * never lets a user past a quota. Agent budgets hold each call's most possible cost while it runs
 * (spend-holds.service.ts): the statement that writes a call's row takes its hold away, so a budget counts
 * every call as held or as spent, never neither; `written(scope)` lets a new hold wait for an
 * agent's ended calls to be written.
 */
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';
import type { Logger } from '../../lib/logger.ts';
import { aiRepo, costUnitsOf, entryOf, monthOf, type SpendHold, type UsageCharge, type UsageEntry, type UsageRow } from './ai.repo.ts';
import type { SpendHolds } from './spend-holds.service.ts';

export type UsageStore = {
  /** a call's usage; its spend holds (if it had any) are taken away when the row is written */
  record(row: UsageRow, holds?: readonly SpendHold[]): void;
  /** the holds of a call that ended without usage (refused, failed): taken away with the next batch */
  release(holds: readonly SpendHold[]): void;
  /**
   * Undefined when no hold of `scope` waits to be written; otherwise a promise that resolves once
   * those holds (and their calls' costs) are written, so a new hold counts costs, not holds, of
   * calls that have ended (a failed write resolves too: the holds then still count, which is safe).
   */
  written(scope: string): Promise<void> | undefined;
  /** tokens used by `userId` in the UTC month containing `at`, including queued rows */
  monthlyTokens(userId: string, at: Date): Promise<number>;
  /** USD of `agentId`'s rows recorded in the UTC month `month` (YYYY-MM-01) and not yet committed (agent budgets) */
  pendingAgentCost(agentId: string, month: string): number;
  /** the same for an API key's rows (key budgets, docs/payments.md "API keys") */
  pendingKeyCost(keyId: string, month: string): number;
  /** resolves once every row recorded so far is written */
  flush(): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
};

/** Entries per statement; a larger queue is written in several batches. */
const MAX_BATCH = 500;

/**
 * An entry takes no more calls past these (a new entry opens for the same key): requests fit the
 * column's integer and the cost units stay far inside exact float integers (2^53).
 */
const ENTRY_MAX_REQUESTS = 1_000_000;
const ENTRY_MAX_COST_UNITS = 1e15;

const DAY_MS = 86_400_000;

/** A queued entry and the key it is found by while it still takes calls. */
type Queued = UsageEntry & { key: string };

export function createUsageStore(deps: {
  db: Pick<Db, 'kysely' | 'pool'>;
  logger?: Logger | undefined;
  /** the process's spend holds, released by the same statements that write the usage (migration 205) */
  holds?: SpendHolds | undefined;
  /**
   * AI_BILLING=balance: pays a batch's billed rows from their wallets inside the transaction that
   * writes them (the ledger service), so usage and journal commit together.
   */
  billing?: { charge(trx: Kysely<DB>, charges: UsageCharge[]): Promise<void> } | undefined;
  /** longest a row waits before its batch is written (default LIMITS.aiUsageFlushMs) */
  flushDelayMs?: number;
}): UsageStore {
  const flushDelayMs = deps.flushDelayMs ?? LIMITS.aiUsageFlushMs;
  const queue: Queued[] = [];
  /** the queued entry of each key that still takes calls (entries leave it when written or full) */
  const open = new Map<string, Queued>();
  /** the batch being written: still counted by monthlyTokens until its statement has committed */
  let writing: Queued[] = [];
  let inFlight: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;

  /** when the oldest queued entry arrived (its window's start) */
  let windowStart = 0;
  /** holds of recorded or ended calls, taken away with the last batch of the next write */
  let releases: SpendHold[] = [];
  /** holds queued so far (a sequence), the last of them written, and the last queued per scope not yet written */
  let releaseSeq = 0;
  let writtenSeq = 0;
  const lastSeqOf = new Map<string, number>();
  const queueRelease = (holds: readonly SpendHold[]) => {
    for (const hold of holds) {
      releases.push(hold);
      lastSeqOf.set(hold.scope, ++releaseSeq);
    }
  };

  /**
   * Writes what is queued when it starts, MAX_BATCH entries per statement. Calls that arrive while
   * it writes wait for their own window: writing them at once (as this did until round 5 of
   * docs/benchmarks.md "AI proxy") kept a statement in flight all the time under load, each with the
   * few calls that arrived during the one before, so the window shared nothing.
   */
  const writeAll = async () => {
    let left = queue.length;
    // every hold queued so far belongs to a call whose row is queued now (or to no row): they go
    // with the last batch, so a cap never counts a call neither as held nor as spent
    const freed = releases;
    const upTo = releaseSeq;
    releases = [];
    while (left > 0 || freed.length > 0) {
      const batch = queue.splice(0, Math.min(MAX_BATCH, left));
      left -= batch.length;
      if (queue.length === 0) open.clear();
      else for (const e of batch) if (open.get(e.key) === e) open.delete(e.key);
      const last = left === 0;
      writing = batch;
      try {
        await write(batch, last ? freed : []);
        if (last) {
          deps.holds?.released(freed);
          writtenSeq = upTo;
          for (const [scope, seq] of lastSeqOf) if (seq <= upTo) lastSeqOf.delete(scope);
        }
      } catch (err) {
        deps.logger?.error({ err, rows: batch.length }, 'ai usage write failed');
        // the rows are lost (logged); their holds are not: they go with the next write
        if (last) releases.push(...freed);
      } finally {
        writing = [];
      }
      if (last) break;
    }
  };

  /** One batch: its rows and rollups, the holds it gives back, and (billing on) its charges, together. */
  const write = async (batch: Queued[], freed: SpendHold[]) => {
    const holder = deps.holds?.holder ?? null;
    const billed = deps.billing ? batch.filter((e) => e.billTo !== null) : [];
    if (billed.length === 0) return aiRepo.insertUsage(deps.db.pool, batch, freed, holder);
    const batchId = randomUUID();
    const eventOf = (address: string) => `ai_usage:${batchId}:${address}`;
    const byAddress = new Map<string, number>();
    for (const e of billed) byAddress.set(e.billTo!, (byAddress.get(e.billTo!) ?? 0) + e.costUnits);
    const charges = [...byAddress].map(([address, costUnits]) => ({ address, costUnits, eventId: eventOf(address) }));
    // the wallets first, then the usage rows and the holds they give back: the order hold_spend locks
    // them in (migration 240), so a hold and this write never wait for each other (a deadlock did,
    // found by docs/benchmarks.md "Billing")
    await deps.db.kysely.transaction().execute(async (trx) => {
      await deps.billing!.charge(trx, charges);
      await aiRepo.insertUsage(deps.db.pool, batch, freed, holder, eventOf, trx);
    });
  };

  const kick = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (inFlight) return;
    inFlight = writeAll().finally(() => {
      inFlight = undefined;
      schedule();
    });
  };

  /** A full batch goes now; otherwise one timer per window, ending flushDelayMs after the window's first call. */
  const schedule = () => {
    if (inFlight || (queue.length === 0 && releases.length === 0)) return;
    if (queue.length >= MAX_BATCH) kick();
    else timer ??= setTimeout(kick, Math.max(0, windowStart + flushDelayMs - Date.now()));
  };

  /** the first row or hold of a window opens it */
  const opening = () => {
    if (queue.length === 0 && releases.length === 0) windowStart = Date.now();
  };

  return {
    release(holds) {
      opening();
      queueRelease(holds);
      schedule();
    },
    written(scope) {
      const want = lastSeqOf.get(scope);
      if (want === undefined || want <= writtenSeq) return undefined;
      return (async () => {
        // at most two writes: the one in flight may have started before this scope's holds were queued
        for (let i = 0; i < 2 && writtenSeq < want; i++) {
          if (!inFlight) kick();
          await inFlight;
        }
      })();
    },
    record(row, holds) {
      opening();
      if (holds) queueRelease(holds);
      const cost = costUnitsOf(row.cost);
      const key = `${row.userId}\u0000${row.agentId ?? '\u0001'}\u0000${row.keyId ?? '\u0001'}\u0000${row.model}\u0000${row.provider}\u0000${Math.floor(row.createdAt.getTime() / DAY_MS)}\u0000${row.priced ? 1 : 0}${row.billTo ?? ''}`;
      const e = open.get(key);
      if (e && e.requests < ENTRY_MAX_REQUESTS && e.costUnits + cost <= ENTRY_MAX_COST_UNITS) {
        e.requests += 1;
        e.promptTokens += row.promptTokens;
        e.completionTokens += row.completionTokens;
        e.totalTokens += row.totalTokens;
        e.costUnits += cost;
        if (holds) schedule();
        return; // its batch is already scheduled
      }
      const entry: Queued = Object.assign(entryOf(row), { key });
      open.set(key, entry);
      queue.push(entry);
      schedule();
    },
    async monthlyTokens(userId, at) {
      // queued and in-flight rows first: a batch that commits meanwhile is counted twice (a
      // moment's overcount), never not at all
      let pending = 0;
      for (const r of queue) if (r.userId === userId) pending += r.totalTokens;
      for (const r of writing) if (r.userId === userId) pending += r.totalTokens;
      return pending + (await aiRepo.monthlyTokens(deps.db.kysely, userId, at));
    },
    pendingAgentCost(agentId, month) {
      // counted like monthlyTokens: a batch committing meanwhile may count twice for a moment, never not at all
      let units = 0;
      for (const rows of [queue, writing])
        for (const r of rows) if (r.agentId === agentId && monthOf(r.createdAt) === month) units += r.costUnits;
      return units / 1e10;
    },
    pendingKeyCost(keyId, month) {
      let units = 0;
      for (const rows of [queue, writing])
        for (const r of rows) if (r.keyId === keyId && monthOf(r.createdAt) === month) units += r.costUnits;
      return units / 1e10;
    },
    async flush() {
      while (queue.length > 0 || releases.length > 0 || inFlight) {
        if (!inFlight) kick();
        await inFlight;
      }
    },
    ping: () => aiRepo.ping(deps.db.kysely),
    async close() {
      await this.flush();
    },
  };
}
