/**
 * Underground events and royalty splits (§4.15, §2 "Underground event", "Royalty split"). Every
 * call names its user (the backend's `x-user-id`, never a body field) and an agent the user must
 * own: 404 for no such agent, 403 for another user's (checked on the owner connection), then the
 * write runs under that user's row-level security, and the (agent, user) foreign key makes a row
 * for someone else's agent impossible even if a check were missed.
 */
import type { Db } from '../../db/client.ts';
import { sha256Hex } from '../../lib/crypto.ts';
import { AppError, conflict, forbidden, notFound } from '../../lib/errors.ts';
import { microsToUsd, usdToMicros } from '../../lib/money.ts';
import type { LedgerService } from '../payments/index.ts';
import { shareToBps, splitAmounts } from './split-math.rules.ts';
import { undergroundRepo as repo } from './underground.repo.ts';
import type { CreateEventInput, CreateSplitInput } from './underground.schemas.ts';

/** GET /api/underground/events returns at most this many (the newest event dates). */
export const EVENTS_LIMIT = 500;

/** 404 without the agent, 403 when another user owns it (§4.15 "caller must own the agent"). */
export async function assertOwnsAgent(db: Db, userId: string, agentId: string): Promise<void> {
  const owner = await repo.agentOwner(db.kysely, agentId);
  if (owner === undefined) throw notFound('Agent not found');
  if (owner !== userId) throw forbidden('You do not own this agent');
}

const iso = (d: Date | string) => (d instanceof Date ? d : new Date(d)).toISOString();

/** The ledger's `source` of a split's rows; the debit's id is `underground_split:<id>`, each credit's `…:<position>`. */
export const SPLIT_SOURCE = 'underground_split';

/** Thrown inside the split's transaction to roll it back when the payer's balance is short. */
const SHORT = Symbol('short balance');

/** 402 `insufficient_balance` (the gateway's body for a short wallet): nothing was written. */
const balanceText = (micros: number) => (micros === 0 ? '0' : microsToUsd(micros));
const insufficient = (balanceMicros: number, totalMicros: number) =>
  new AppError('INSUFFICIENT_BALANCE', undefined, {
    message: `The split needs ${microsToUsd(totalMicros)} USDC; your wallet balance is ${balanceText(balanceMicros)}`,
    balance: balanceText(balanceMicros),
    cost: microsToUsd(totalMicros),
  });

export function createUndergroundService(deps: { db: Db; ledger: Pick<LedgerService, 'transfer' | 'balance'> }) {
  const { db, ledger } = deps;
  const toEvent = (r: Awaited<ReturnType<typeof repo.insertEvent>>) => ({
    ...r,
    event_date: iso(r.event_date),
    created_at: iso(r.created_at),
  });

  return {
    async createEvent(userId: string, input: CreateEventInput) {
      await assertOwnsAgent(db, userId, input.agentId);
      const row = await db.withUser(userId, (trx) =>
        repo.insertEvent(trx, {
          agentId: input.agentId,
          userId,
          name: input.name,
          description: input.description,
          venue: input.venue,
          eventDate: new Date(input.eventDate),
          ticketPriceUsdc: input.ticketPriceUsdc,
          totalTickets: input.totalTickets,
        }),
      );
      return toEvent(row);
    },

    /** The events of the caller's agents (row-level security), newest event date first. */
    async listEvents(userId: string) {
      const rows = await db.withUser(userId, (trx) => repo.listEvents(trx, EVENTS_LIMIT));
      return rows.map(toEvent);
    },

    /**
     * Records a split and pays it in one transaction (docs/underground.md "Royalty splits"): the
     * split, its recipients, the debit of the owner's wallet and a credit per recipient, or
     * nothing. With an idempotency key, a repeat (or 50 parallel copies) returns the first split
     * and moves no money again; the same key with a different request is 409. A short balance is
     * 402 and writes nothing.
     */
    async createSplit(userId: string, input: CreateSplitInput, idempotencyKey: string | undefined) {
      const totalMicros = usdToMicros(input.totalAmount);
      if (totalMicros === undefined || totalMicros <= 0) throw new AppError('BAD_REQUEST', 'totalAmount must be above 0');
      const bps = input.recipients.map((r, i) => shareToBps(r.share, i));
      const addresses = input.recipients.map((r) => r.address.toLowerCase());
      if (new Set(addresses).size !== addresses.length) throw new AppError('BAD_REQUEST', 'Each recipient address may appear only once');
      const amounts = splitAmounts(totalMicros, bps);
      await assertOwnsAgent(db, userId, input.agentId);
      // what the request asks for, normalised: a retry with the same key must ask for the same
      const requestHash = sha256Hex(JSON.stringify([input.agentId, input.name, totalMicros, addresses.map((a, i) => [a, bps[i]])]));
      const recipients = addresses.map((address, i) => ({ address, shareBps: bps[i]!, amountMicros: amounts[i]! }));
      // the payer is the split's owner: the balance of their session wallet (GET /api/wallet)
      const payer = await repo.sessionWalletAddress(db.kysely, userId);
      let split: Awaited<ReturnType<typeof repo.insertSplitOnce>>;
      try {
        split = await db.kysely.transaction().execute(async (trx) => {
          const s = await repo.insertSplitOnce(trx, {
            agentId: input.agentId,
            userId,
            name: input.name,
            totalMicros,
            idempotencyKey: idempotencyKey ?? null,
            requestHash,
            recipients,
          });
          if (!s.created) return s; // a repeat: paid (or refused as a different request) below
          if (!payer) throw SHORT;
          const paid = await ledger.transfer(trx, {
            from: { address: payer, reference: `${SPLIT_SOURCE}:${s.id}` },
            to: recipients.map((r, i) => ({ address: r.address, amountMicros: r.amountMicros, eventId: `${SPLIT_SOURCE}:${s.id}:${i}` })),
            source: SPLIT_SOURCE,
          });
          if (!paid.ok) throw SHORT;
          return s;
        });
      } catch (err) {
        if (err === SHORT) throw insufficient(payer ? await ledger.balance(payer) : 0, totalMicros);
        throw err;
      }
      if (split.requestHash !== requestHash) throw conflict('Idempotency key already used with a different split');
      const stored = split.created
        ? recipients
        : (await db.withUser(userId, (trx) => repo.splitRecipients(trx, split.id))).map((r) => ({
            address: r.address,
            shareBps: r.share_bps,
            amountMicros: r.amount_micros,
          }));
      return {
        created: split.created,
        body: {
          success: true as const,
          splitId: split.id,
          status: 'completed' as const,
          recipients: stored.map((r) => ({ address: r.address, share: r.shareBps / 100, amountMicros: r.amountMicros })),
        },
      };
    },
  };
}

export type UndergroundService = ReturnType<typeof createUndergroundService>;
