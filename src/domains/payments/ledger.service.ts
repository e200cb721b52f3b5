/**
 * The ledger's service: credits (card top-ups, once per checkout session) and wallet debits, in
 * integer micro-USD. The journal and its constraints are in migration 020; docs/payments.md
 * describes them. Other domains (top-up webhook, payment sessions) move money only through here.
 */
import type { Db } from '../../db/client.ts';
import { AppError, badRequest } from '../../lib/errors.ts';
import { ledgerRepo } from './ledger.repo.ts';
import { isMicros, normalizeAddress } from './money.ts';

export type CreditInput = {
  /** wallet address, 0x + 40 hex (any case; stored lower-case) */
  address: string;
  /** positive integer micro-USD */
  amountMicros: number;
  /** a unique id of the payment (for card top-ups `checkout:<checkout session id>`): credits at most once */
  eventId: string;
  /** ids an earlier version may have recorded this same payment under: none of them may be credited already */
  priorEventIds?: string[];
  /** free-form origin, e.g. `card_top_up` */
  source: string;
};

export type DebitInput = { address: string; amountMicros: number; reference: string; source: string };

const isCheckViolation = (err: unknown) => (err as { code?: string })?.code === '23514';

function validate(address: string, amountMicros: number, id: string) {
  const a = normalizeAddress(address);
  if (!a) throw badRequest('Invalid address');
  if (!isMicros(amountMicros)) throw badRequest('Invalid amount');
  if (typeof id !== 'string' || id.length < 1 || id.length > 255) throw badRequest('Invalid event id');
  return a;
}

export function createLedgerService(deps: { db: Db }) {
  const db = deps.db.kysely;
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

    /**
     * Debits the wallet once per `reference`. 402 `insufficient_balance` when the balance does not
     * cover it (the CHECK on wallet_balances refuses the row; nothing changes).
     */
    async debit(input: DebitInput): Promise<{ debited: boolean; balanceMicros: number }> {
      const address = validate(input.address, input.amountMicros, input.reference);
      try {
        const row = await ledgerRepo.debit(db, { ...input, address });
        return { debited: row !== undefined, balanceMicros: await ledgerRepo.balance(db, address) };
      } catch (err) {
        if (isCheckViolation(err)) {
          throw new AppError('INSUFFICIENT_BALANCE', undefined, { balance: await ledgerRepo.balance(db, address) });
        }
        throw err;
      }
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
