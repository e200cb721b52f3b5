/**
 * What a user's x402 `pay` costs them (docs/payments.md "x402"): the amount, in micro-USD, is
 * debited from the user's wallet balance (their session wallet, the balance GET /api/wallet shows)
 * through the ledger service before the gateway is called, and credited back once when the call
 * fails. A user's charges of one UTC day, net of refunds, stay within X402_USER_DAILY_CAP_USD.
 *
 * The cap is read from the journal and the debit written in one owner-connection transaction
 * under a per-user advisory lock, so parallel calls cannot both pass the same total; the balance
 * itself needs no lock (the CHECK on wallet_balances refuses an overdraft).
 */
import type { Db } from '../../db/client.ts';
import { AppError, tooManyRequests } from '../../lib/errors.ts';
import { MICROS_PER_USD, microsToUsd } from '../../lib/money.ts';
import type { LedgerService } from '../payments/index.ts';
import { x402Repo } from './x402.repo.ts';

/** The ledger `source` of a charge (event id `x402_pay:<attempt id>`) and of its refund (`x402_refund:<attempt id>`). */
export const X402_PAY_SOURCE = 'x402_pay';
export const X402_REFUND_SOURCE = 'x402_refund';

export type X402Charge =
  | { ok: true; attemptId: string; address: string; amountMicros: number }
  /** `reason` is what the audit row records; `error` what the caller answers */
  | { ok: false; reason: string; error: AppError };

const SHORT = Symbol('short balance');
const usd = (micros: number) => (micros === 0 ? '0' : microsToUsd(micros));

export function createX402Charges(deps: {
  db: Db;
  ledger: Pick<LedgerService, 'tryDebit' | 'credit' | 'balance' | 'spentToday'>;
  /** X402_USER_DAILY_CAP_USD */
  dailyCapUsd: number;
}) {
  const { db, ledger } = deps;
  const capMicros = deps.dailyCapUsd * MICROS_PER_USD;

  const short = (balanceMicros: number, amountMicros: number): X402Charge => ({
    ok: false,
    reason: `insufficient_balance: balance ${usd(balanceMicros)}, cost ${microsToUsd(amountMicros)}`,
    error: new AppError('INSUFFICIENT_BALANCE', undefined, {
      message: `This payment needs ${microsToUsd(amountMicros)} USD; your wallet balance is ${usd(balanceMicros)}`,
      balance: usd(balanceMicros),
      cost: microsToUsd(amountMicros),
    }),
  });

  return {
    /** Debits `amount` (US dollars, at most 6 decimals: validated by the caller) or says why not. */
    async charge(userId: string, p: { attemptId: string; amount: number }): Promise<X402Charge> {
      const amountMicros = Math.round(p.amount * MICROS_PER_USD);
      const address = await x402Repo.sessionWalletAddress(db.kysely, userId);
      if (!address) return short(0, amountMicros);
      let spent = 0;
      try {
        const within = await db.kysely.transaction().execute(async (trx) => {
          await x402Repo.lockUserCharges(trx, userId);
          spent = await ledger.spentToday(trx, address, [X402_PAY_SOURCE, X402_REFUND_SOURCE]);
          if (spent + amountMicros > capMicros) return false;
          const r = await ledger.tryDebit(
            { address, amountMicros, reference: `${X402_PAY_SOURCE}:${p.attemptId}`, source: X402_PAY_SOURCE },
            trx,
          );
          if (!r.ok) throw SHORT; // the failed statement aborted the transaction: roll it back
          return true;
        });
        if (!within) {
          const message = `Daily x402 limit reached: ${microsToUsd(spent)} of ${microsToUsd(capMicros)} USD spent today (UTC); this payment needs ${microsToUsd(amountMicros)}`;
          return {
            ok: false,
            reason: message,
            error: tooManyRequests(message, { dailyCap: microsToUsd(capMicros), spentToday: usd(spent) }),
          };
        }
      } catch (err) {
        if (err === SHORT) return short(await ledger.balance(address), amountMicros);
        throw err;
      }
      return { ok: true, attemptId: p.attemptId, address, amountMicros };
    },

    /** Gives a charge back, once (the refund's event id is UNIQUE). */
    async refund(c: Extract<X402Charge, { ok: true }>): Promise<void> {
      await ledger.credit({
        address: c.address,
        amountMicros: c.amountMicros,
        eventId: `${X402_REFUND_SOURCE}:${c.attemptId}`,
        source: X402_REFUND_SOURCE,
      });
    },
  };
}

export type X402Charges = ReturnType<typeof createX402Charges>;
