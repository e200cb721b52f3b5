/**
 * SQL of the Underground (§4.15). Everything done for a user runs in the RLS-bound transaction from
 * `db.withUser` (pass the `Tx`), except where noted. Two lookups run on the owner connection
 * (`Kysely<DB>`) by design: who owns an agent and who owns a wallet address, so a call naming
 * another user's agent or wallet is told 403 (§4.15) rather than a 404 that row-level security
 * alone would give. A split is written on the owner connection too: it commits in one transaction
 * with the ledger rows that pay it, and the money tables refuse the request role
 * (docs/payments.md "Who may touch the money tables"); its rows name their user explicitly and
 * the (agent, user) foreign key still refuses a row for another user's agent.
 */
import type { Kysely } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';

const eventColumns = [
  'id',
  'agent_id',
  'name',
  'description',
  'venue',
  'event_date',
  'ticket_price_usdc',
  'total_tickets',
  'created_at',
] as const;

export type NewEvent = {
  agentId: string;
  userId: string;
  name: string;
  description: string;
  venue: string;
  eventDate: Date;
  ticketPriceUsdc: string;
  totalTickets: number;
};

export type NewSplit = {
  agentId: string;
  userId: string;
  name: string;
  totalMicros: number;
  idempotencyKey: string | null;
  requestHash: string;
  recipients: { address: string; shareBps: number; amountMicros: number }[];
};

export const undergroundRepo = {
  /** Owner connection: the agent's owner, or undefined when there is no such agent. */
  async agentOwner(db: Kysely<DB>, agentId: string): Promise<string | undefined> {
    const row = await db.selectFrom('agents').select('user_id').where('id', '=', agentId).executeTakeFirst();
    return row?.user_id;
  },

  /** Owner connection: the wallet's owner, or undefined when no agent has this address. */
  async walletOwner(db: Kysely<DB>, address: string): Promise<string | undefined> {
    const row = await db.selectFrom('underground_agent_wallets').select('user_id').where('address', '=', address).executeTakeFirst();
    return row?.user_id;
  },

  /** The sealed private key of the agent's wallet (RLS: only its owner's context sees it), if it has one. */
  async walletKey(trx: Tx, agentId: string): Promise<string | undefined> {
    const row = await trx
      .selectFrom('underground_agent_wallets')
      .select('private_key_enc')
      .where('agent_id', '=', agentId)
      .executeTakeFirst();
    return row?.private_key_enc;
  },

  insertEvent(trx: Tx, e: NewEvent) {
    return trx
      .insertInto('underground_events')
      .values({
        agent_id: e.agentId,
        user_id: e.userId,
        name: e.name,
        description: e.description,
        venue: e.venue,
        event_date: e.eventDate,
        ticket_price_usdc: e.ticketPriceUsdc,
        total_tickets: e.totalTickets,
      })
      .returning(eventColumns)
      .executeTakeFirstOrThrow();
  },

  /** The user's events (RLS), newest event date first; ties newest created first. */
  listEvents(trx: Tx, limit: number) {
    return trx
      .selectFrom('underground_events')
      .select(eventColumns)
      .orderBy('event_date', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
  },

  /**
   * Inserts the agent's wallet unless it has one; either way returns the agent's wallet, and
   * whether this call created it. Concurrent creates wait on the primary key and then read the
   * winner's row (READ COMMITTED: the next statement sees the committed insert).
   */
  async insertWalletOnce(trx: Tx, w: { agentId: string; userId: string; address: string; privateKeyEnc: string }) {
    const inserted = await trx
      .insertInto('underground_agent_wallets')
      .values({ agent_id: w.agentId, user_id: w.userId, address: w.address, private_key_enc: w.privateKeyEnc })
      .onConflict((oc) => oc.column('agent_id').doNothing())
      .returning(['agent_id', 'address', 'created_at'])
      .executeTakeFirst();
    if (inserted) return { ...inserted, created: true };
    const existing = await trx
      .selectFrom('underground_agent_wallets')
      .select(['agent_id', 'address', 'created_at'])
      .where('agent_id', '=', w.agentId)
      .executeTakeFirstOrThrow();
    return { ...existing, created: false };
  },

  /** Owner connection: the user's session wallet (whose ledger balance pays their splits), if any. */
  async sessionWalletAddress(db: Kysely<DB>, userId: string): Promise<string | undefined> {
    const row = await db.selectFrom('session_wallets').select('address').where('user_id', '=', userId).executeTakeFirst();
    return row?.address.toLowerCase();
  },

  /**
   * Owner transaction (see the header). Records a split and its recipients; with an idempotency key
   * already used by this user, inserts nothing and returns the earlier split (`created: false`)
   * with the hash of its request. A concurrent insert with the same key waits on the unique index
   * until the first commits (then reads its split) or rolls back (then inserts its own).
   */
  async insertSplitOnce(trx: Kysely<DB>, s: NewSplit) {
    const inserted = await trx
      .insertInto('underground_splits')
      .values({
        agent_id: s.agentId,
        user_id: s.userId,
        name: s.name,
        total_micros: s.totalMicros,
        idempotency_key: s.idempotencyKey,
        request_hash: s.requestHash,
      })
      .onConflict((oc) => oc.columns(['user_id', 'idempotency_key']).doNothing())
      .returning(['id', 'status'])
      .executeTakeFirst();
    if (inserted) {
      await trx
        .insertInto('underground_split_recipients')
        .values(
          s.recipients.map((r, position) => ({
            split_id: inserted.id,
            user_id: s.userId,
            position,
            address: r.address,
            share_bps: r.shareBps,
            amount_micros: r.amountMicros,
          })),
        )
        .execute();
      return { id: inserted.id, status: inserted.status, requestHash: s.requestHash, created: true };
    }
    const existing = await trx
      .selectFrom('underground_splits')
      .select(['id', 'status', 'request_hash'])
      .where('user_id', '=', s.userId)
      .where('idempotency_key', '=', s.idempotencyKey)
      .executeTakeFirstOrThrow();
    return { id: existing.id, status: existing.status, requestHash: existing.request_hash, created: false };
  },

  splitRecipients(trx: Tx, splitId: number) {
    return trx
      .selectFrom('underground_split_recipients')
      .select(['address', 'share_bps', 'amount_micros'])
      .where('split_id', '=', splitId)
      .orderBy('position')
      .execute();
  },
};
