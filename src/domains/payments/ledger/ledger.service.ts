/**
 * The ledger's service: wallet credits (card top-ups, once per checkout session; an admin's
 * credit, once per request id, with its note; refunds of a failed plugin call) and wallet debits (the gateway's card method), in integer micro-USD. The
 * journal and its constraints are in migration 020; docs/payments.md "The ledger" describes them.
 * Every credit and debit of a wallet balance goes through here; only this service calls
 * ledger.repo.ts. Payment sessions move money between a wallet and a session with their own
 * journal rows (../sessions/sessions.repo.ts), under the same constraints.
 */
import type { Kysely } from 'kysely';
import type { Db } from '../../../db/client.ts';
import { isCheckViolation } from '../../../db/errors.ts';
import type { DB } from '../../../db/schema.ts';
import { AppError, badRequest } from '../../../lib/errors.ts';
import { isMicros, normalizeAddress } from '../../../lib/money.ts';
import { ledgerRepo } from './ledger.repo.ts';

export type CreditInput = {
  /** wallet address, 0x + 40 hex (any case; stored lower-case) */
  address: string;
  /** positive integer micro-USD */
  amountMicros: number;
  /** a unique id of the payment (for card top-ups `checkout:<checkout session id>`): credits at most once */
  eventId: string;
  /** ids an earlier version may have recorded this same payment under: none of them may be credited already */
  priorEventIds?: string[];
  /** free-form origin, e.g. `card_top_up`, `admin_credit` */
  source: string;
  /** why, in words the wallet's owner reads in the journal (an admin credit's note), at most 500 characters */
  note?: string | null | undefined;
  /** the account that moved the money by hand (an admin credit: the admin) */
  actorUserId?: string | null | undefined;
};

/** One row of a wallet's journal as its owner reads it (GET /api/wallet/journal). */
export type JournalEntry = {
  id: number;
  kind: string;
  /** signed micro-USD: credits positive, debits negative */
  amountMicros: number;
  balanceAfterMicros: number;
  description: string;
  note: string | null;
  createdAt: Date;
};

/** What a journal row's `source` means to the wallet's owner. */
function describe(row: { kind: string; source: string | null; plugin: string | null }): string {
  const source = row.source ?? '';
  if (source === 'admin_credit') return 'Credit by an admin';
  if (source === 'card_top_up') return 'Card top-up';
  if (source === 'plugin_failed') return 'Refund: the plugin call failed';
  if (source.startsWith('gateway:')) return `Gateway call: ${source.slice('gateway:'.length)}`;
  if (source === 'underground_split') return row.kind === 'credit' ? 'Royalty split received' : 'Royalty split paid';
  if (source === 'x402_pay') return 'x402 payment';
  if (source === 'ai_usage') return 'Model usage';
  if (source === 'x402_refund') return 'Refund: the x402 payment did not go through';
  if (row.kind === 'session_open') return 'Payment session opened';
  if (row.kind === 'session_close') return 'Payment session closed: remainder returned';
  if (row.kind === 'session_expire') return 'Payment session expired: remainder returned';
  if (row.kind === 'session_refund') return 'Payment session refund';
  return row.kind === 'credit' ? 'Credit' : 'Debit';
}

export type DebitInput = { address: string; amountMicros: number; reference: string; source: string };

/**
 * A debit as a value (docs/architecture.md rule 3): a short balance is an expected answer, so the
 * caller decides what it means (the gateway tries the caller's next wallet). `debited: false`
 * means the reference was used already: nothing moved this time.
 */
export type DebitResult = { ok: true; debited: boolean } | { ok: false; code: 'INSUFFICIENT_BALANCE' };

/**
 * One payer, several payees, moved together (a royalty split): the debit is the payees' sum. A
 * payee's zero amount writes no row (the journal holds movements only).
 */
export type TransferInput = {
  from: { address: string; reference: string };
  to: { address: string; amountMicros: number; eventId: string }[];
  source: string;
};

function validate(address: string, amountMicros: number, id: string) {
  const a = normalizeAddress(address);
  if (!a) throw badRequest('Invalid address');
  if (!isMicros(amountMicros)) throw badRequest('Invalid amount');
  if (typeof id !== 'string' || id.length < 1 || id.length > 255) throw badRequest('Invalid event id');
  return a;
}

export function createLedgerService(deps: { db: Db }) {
  const db = deps.db.kysely;

  /**
   * Debits the wallet once per `reference`; a balance that does not cover it is refused by the
   * CHECK on wallet_balances (nothing changes) and answered as `{ ok: false }`. Inside a caller's
   * transaction `trx` (owner connection) a refusal leaves it aborted: the caller rolls back.
   */
  async function tryDebit(input: DebitInput, trx: Kysely<DB> = db): Promise<DebitResult> {
    const address = validate(input.address, input.amountMicros, input.reference);
    try {
      const row = await ledgerRepo.debit(trx, { ...input, address });
      return { ok: true, debited: row !== undefined };
    } catch (err) {
      if (isCheckViolation(err)) return { ok: false, code: 'INSUFFICIENT_BALANCE' };
      throw err;
    }
  }

  /**
   * Debits the payer and credits every payee inside the caller's transaction `trx` on the owner
   * connection, so the caller's own record of why the money moved commits or rolls back with it.
   * Rows are written in address order (the debit before a credit to the same address): the
   * journal's trigger locks each balance row it changes, and one order for every transfer means
   * two transfers between the same wallets in opposite directions cannot deadlock.
   * A short balance answers `{ ok: false }` and leaves `trx` aborted by PostgreSQL: the caller must
   * roll back (throw). The ids' UNIQUE makes a repeated transfer move nothing (`debited: false`).
   */
  async function transfer(trx: Kysely<DB>, input: TransferInput): Promise<DebitResult> {
    const total = input.to.reduce((s, t) => s + t.amountMicros, 0);
    const from = validate(input.from.address, total, input.from.reference);
    const moves = [
      { address: from, amountMicros: -total, id: input.from.reference },
      ...input.to
        .filter((t) => t.amountMicros !== 0)
        .map((t) => ({ address: validate(t.address, t.amountMicros, t.eventId), amountMicros: t.amountMicros, id: t.eventId })),
    ].sort((a, b) => (a.address === b.address ? a.amountMicros - b.amountMicros : a.address < b.address ? -1 : 1));
    let debited = false;
    try {
      for (const m of moves) {
        if (m.amountMicros < 0) {
          debited =
            (await ledgerRepo.debit(trx, { address: m.address, amountMicros: total, reference: m.id, source: input.source })) !== undefined;
          if (!debited) return { ok: true, debited: false }; // the transfer was made already: its credits too
        } else {
          await ledgerRepo.credit(trx, { address: m.address, amountMicros: m.amountMicros, eventId: m.id, source: input.source });
        }
      }
    } catch (err) {
      if (isCheckViolation(err)) return { ok: false, code: 'INSUFFICIENT_BALANCE' };
      throw err;
    }
    return { ok: true, debited };
  }

  return {
    /**
     * Credits `amountMicros` to the wallet once per `eventId`. A replay (same event id, even
     * concurrently) credits nothing and answers `credited: false`.
     */
    async credit(input: CreditInput): Promise<{ credited: boolean; balanceMicros: number }> {
      const address = validate(input.address, input.amountMicros, input.eventId);
      const row = await ledgerRepo.credit(db, { ...input, address });
      return { credited: row !== undefined, balanceMicros: await ledgerRepo.balance(db, address) };
    },

    tryDebit,
    transfer,

    /**
     * Pays model usage from wallets (AI_BILLING=balance, docs/payments.md "Model calls from the
     * balance") inside the transaction `trx` that writes the usage rows, so both commit together.
     * Each charge is a batch's cost for one wallet in 1e-10 USD; the journal's debit (source
     * `ai_usage`, id `eventId`, which the usage rows carry) is the micro-dollars the wallet's
     * running total crossed. Wallets in address order: two writers never lock them crosswise.
     */
    async chargeUsage(trx: Kysely<DB>, charges: { address: string; costUnits: number; eventId: string }[]): Promise<void> {
      const sorted = [...charges].sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
      for (const c of sorted) {
        const address = normalizeAddress(c.address);
        if (!address || !Number.isSafeInteger(c.costUnits) || c.costUnits < 0) throw badRequest('Invalid usage charge');
        if (c.costUnits > 0) await ledgerRepo.chargeUsage(trx, { address, costUnits: c.costUnits, eventId: c.eventId });
      }
    },

    /**
     * `tryDebit` for a caller that answers a short balance as is: 402 `insufficient_balance` with
     * the wallet's balance, and the balance after the debit otherwise.
     */
    async debit(input: DebitInput): Promise<{ debited: boolean; balanceMicros: number }> {
      const r = await tryDebit(input); // validates: the address is well formed below
      const address = normalizeAddress(input.address)!;
      if (!r.ok) throw new AppError('INSUFFICIENT_BALANCE', undefined, { balance: await ledgerRepo.balance(db, address) });
      return { debited: r.debited, balanceMicros: await ledgerRepo.balance(db, address) };
    },

    /**
     * The journal row of a credit or debit id, with the wallet's balance right after it: what a
     * repeated request (same id) answers, the same each time.
     */
    async entry(eventId: string) {
      const row = await ledgerRepo.entryByEvent(db, eventId);
      if (!row) return undefined;
      return {
        id: row.id,
        kind: row.kind,
        address: row.address,
        amountMicros: Number(row.wallet_delta),
        note: row.note,
        actorUserId: row.actor_user_id,
        createdAt: row.created_at,
        balanceAfterMicros: await ledgerRepo.balanceAfter(db, row.address, row.id),
      };
    },

    /** The wallet's movements, newest first, `limit` at a time (`before`: the last id of the previous page). */
    async journal(address: string, page: { limit: number; before?: number | undefined }): Promise<JournalEntry[]> {
      const a = normalizeAddress(address);
      if (!a) throw badRequest('Invalid address');
      const rows = await ledgerRepo.journal(db, a, page);
      return rows.map((r) => ({
        id: r.id,
        kind: r.kind,
        amountMicros: r.wallet_delta,
        balanceAfterMicros: r.balance_after,
        description: describe(r),
        note: r.note,
        createdAt: r.created_at,
      }));
    },

    /**
     * Micro-USD the wallet's rows of `sources` took since midnight UTC, net of their refunds (an
     * x402 user's daily cap). Read inside the caller's transaction, under its lock, to decide a debit.
     */
    async spentToday(trx: Kysely<DB>, address: string, sources: string[]): Promise<number> {
      const a = normalizeAddress(address);
      if (!a) throw badRequest('Invalid address');
      return ledgerRepo.spentToday(trx, a, sources);
    },

    /** Spendable off-chain balance of a wallet in micro-USD (0 for an unknown address). */
    async balance(address: string): Promise<number> {
      const a = normalizeAddress(address);
      if (!a) throw badRequest('Invalid address');
      return ledgerRepo.balance(db, a);
    },

    /** Wallets and sessions whose stored amount differs from their journal; empty when consistent. */
    audit: () => ledgerRepo.mismatches(db),
  };
}

export type LedgerService = ReturnType<typeof createLedgerService>;
