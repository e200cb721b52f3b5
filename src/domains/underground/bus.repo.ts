/**
 * SQL of the Underground bus (§4.15). Owner connection only: messages arrive without a session and
 * name agents of every account (migration 195 keeps the request role out of the bus tables).
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/types.gen.ts';

type Conn = Kysely<DB> | Tx;

export type DeliveryRow = { id: number; message_id: string; target: string; payload: unknown; attempts: number };

export type NegotiationRow = {
  booking_id: string;
  initiator_agent_id: string;
  counterparty_agent_id: string;
  state: 'open' | 'accepted' | 'declined';
  slot: Date;
  price_micro_usdc: number;
  rounds: number;
  proposed_by: string;
};

export const busRepo = {
  /** The agent's Underground wallet address (migration 190), or undefined for an unknown agent or one without a wallet. */
  async walletAddress(db: Conn, agentId: string): Promise<string | undefined> {
    const r = await db.selectFrom('underground_agent_wallets').select('address').where('agent_id', '=', agentId).executeTakeFirst();
    return r?.address;
  },

  /** The agents among `ids` that exist, with their configured webhook URL (agent config `underground.webhookUrl`) or null. */
  async webhooks(db: Conn, ids: string[]): Promise<Map<string, string | null>> {
    if (ids.length === 0) return new Map();
    const rows = await db
      .selectFrom('agents')
      .select(['id', sql<string | null>`config #>> '{underground,webhookUrl}'`.as('webhook')])
      .where('id', 'in', ids)
      .execute();
    return new Map(rows.map((r) => [r.id, r.webhook]));
  },

  async messageHash(db: Conn, messageId: string): Promise<string | undefined> {
    const r = await db.selectFrom('underground_bus_messages').select('hash').where('message_id', '=', messageId).executeTakeFirst();
    return r?.hash;
  },

  /** Records an accepted message; false when its messageId is taken (a replay, or a concurrent copy). */
  async recordMessage(
    trx: Tx,
    m: { messageId: string; hash: string; action: string; from: string; to: string; step: unknown },
  ): Promise<boolean> {
    const r = await trx
      .insertInto('underground_bus_messages')
      .values({
        message_id: m.messageId,
        hash: m.hash,
        action: m.action,
        from_agent_id: m.from,
        to_agent_id: m.to,
        step: m.step === undefined ? null : JSON.stringify(m.step),
      })
      .onConflict((oc) => oc.column('message_id').doNothing())
      .returning('message_id')
      .executeTakeFirst();
    return r !== undefined;
  },

  /** The negotiation, locked for this transaction (two messages on one booking apply one after the other). */
  negotiationForUpdate(trx: Tx, bookingId: string): Promise<NegotiationRow | undefined> {
    return trx
      .selectFrom('underground_bus_negotiations')
      .select(['booking_id', 'initiator_agent_id', 'counterparty_agent_id', 'state', 'slot', 'price_micro_usdc', 'rounds', 'proposed_by'])
      .where('booking_id', '=', bookingId)
      .forUpdate()
      .executeTakeFirst() as Promise<NegotiationRow | undefined>;
  },

  /** Opens a negotiation; false when the bookingId exists already. */
  async openNegotiation(
    trx: Tx,
    n: { bookingId: string; from: string; to: string; slot: Date; priceMicro: bigint; messageId: string },
  ): Promise<boolean> {
    const r = await trx
      .insertInto('underground_bus_negotiations')
      .values({
        booking_id: n.bookingId,
        initiator_agent_id: n.from,
        counterparty_agent_id: n.to,
        state: 'open',
        slot: n.slot,
        price_micro_usdc: Number(n.priceMicro), // at most 1e12: exact in a double
        last_message_id: n.messageId,
        proposed_by: n.from,
      })
      .onConflict((oc) => oc.column('booking_id').doNothing())
      .returning('booking_id')
      .executeTakeFirst();
    return r !== undefined;
  },

  updateNegotiation(
    trx: Tx,
    bookingId: string,
    n: { state: NegotiationRow['state']; slot: Date; priceMicro: bigint; rounds: number; messageId: string; proposedBy: string },
  ) {
    return trx
      .updateTable('underground_bus_negotiations')
      .set({
        state: n.state,
        slot: n.slot,
        price_micro_usdc: Number(n.priceMicro), // at most 1e12: exact in a double
        rounds: n.rounds,
        last_message_id: n.messageId,
        proposed_by: n.proposedBy,
        updated_at: sql<Date>`now()`,
      })
      .where('booking_id', '=', bookingId)
      .execute();
  },

  insertDeliveries(trx: Tx, rows: { messageId: string; recipient: string; target: string; payload: unknown }[]) {
    return trx
      .insertInto('underground_bus_deliveries')
      .values(
        rows.map((r) => ({
          message_id: r.messageId,
          recipient_agent_id: r.recipient,
          target: r.target,
          payload: JSON.stringify(r.payload),
        })),
      )
      .onConflict((oc) => oc.columns(['message_id', 'recipient_agent_id']).doNothing())
      .execute();
  },

  /** The oldest due pending delivery, locked for this transaction; other workers skip it. */
  takeDue(trx: Tx): Promise<DeliveryRow | undefined> {
    return trx
      .selectFrom('underground_bus_deliveries')
      .select(['id', 'message_id', 'target', 'payload', 'attempts'])
      .where('state', '=', 'pending')
      .where('next_attempt_at', '<=', sql<Date>`now()`)
      .orderBy('next_attempt_at')
      .orderBy('id')
      .limit(1)
      .forUpdate()
      .skipLocked()
      .executeTakeFirst() as Promise<DeliveryRow | undefined>;
  },

  markDelivered(trx: Tx, id: number) {
    return trx
      .updateTable('underground_bus_deliveries')
      .set({ state: 'delivered', attempts: sql<number>`attempts + 1`, last_error: null, delivered_at: sql<Date>`now()` })
      .where('id', '=', id)
      .execute();
  },

  /** A failed attempt: pending again after `retryInMs`, or failed for good after the last one. */
  markFailed(trx: Tx, id: number, error: string, retryInMs: number | null) {
    return trx
      .updateTable('underground_bus_deliveries')
      .set({
        state: retryInMs === null ? 'failed' : 'pending',
        attempts: sql<number>`attempts + 1`,
        last_error: error.slice(0, 500),
        next_attempt_at: sql<Date>`now() + make_interval(secs => ${(retryInMs ?? 0) / 1000})`,
      })
      .where('id', '=', id)
      .execute();
  },
};
