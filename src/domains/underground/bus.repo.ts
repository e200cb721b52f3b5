/**
 * SQL of the Underground bus (§4.15). Owner connection only: messages arrive without a session and
 * name agents of every account (migration 195 keeps the request role out of the bus tables).
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/types.gen.ts';

type Conn = Kysely<DB> | Tx;

/** A claimed delivery; `attempts` counts the attempt it was claimed for. */
export type DeliveryRow = { id: number; message_id: string; target: string; payload: unknown; attempts: number };

/** The sending agent's owner: the plan and the facts of the admin rule (src/domains/accounts/admin.rules.ts). */
export type SenderOwner = {
  user_id: string;
  plan: string;
  email: string;
  is_admin: boolean;
  email_verified: boolean;
  password_predates_verification: boolean;
};

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

  /** The owner of the agent and what decides their plan (§2 Plans; admins get network's), or undefined for an unknown agent. */
  senderOwner(db: Conn, agentId: string): Promise<SenderOwner | undefined> {
    return db
      .selectFrom('agents')
      .innerJoin('users', 'users.id', 'agents.user_id')
      .select([
        'users.id as user_id',
        'users.plan',
        'users.email',
        'users.is_admin',
        'users.email_verified',
        'users.password_predates_verification',
      ])
      .where('agents.id', '=', agentId)
      .executeTakeFirst();
  },

  /**
   * Adds `n` to the owner's A2A messages of `day` (UTC) unless that would pass `cap`: one
   * conditional upsert, so concurrent senders on any replica wait on the row and the cap holds
   * exactly (migration 232). The new count, or undefined when the cap refused it (nothing added).
   * The caller keeps n <= cap, so the first insert of a day cannot pass it.
   */
  async addA2A(trx: Tx, c: { userId: string; day: string; n: number; cap: number }): Promise<number | undefined> {
    const r = await sql<{ sent: number }>`
      INSERT INTO underground_a2a_daily AS d (user_id, day, sent) VALUES (${c.userId}, ${c.day}::date, ${c.n})
      ON CONFLICT (user_id, day) DO UPDATE SET sent = d.sent + excluded.sent WHERE d.sent + excluded.sent <= ${c.cap}
      RETURNING sent`.execute(trx);
    return r.rows[0]?.sent;
  },

  /** The owner's A2A messages of `day` so far (0 when none). */
  async a2aSent(db: Conn, userId: string, day: string): Promise<number> {
    const r = await db
      .selectFrom('underground_a2a_daily')
      .select('sent')
      .where('user_id', '=', userId)
      .where('day', '=', sql<Date>`${day}::date`)
      .executeTakeFirst();
    return r?.sent ?? 0;
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

  /**
   * Claims the oldest due delivery and commits the claim: `attempts` counts this attempt, and the
   * row carries the claim's `token` and a lease of `leaseMs` (due again when the lease passes, in
   * case this worker dies mid-call). Skipped: rows another worker holds, and rows whose target host
   * already has `perTargetCap` deliveries in flight, so one slow host cannot take every slot.
   * Claims are serialised by a transaction-scoped advisory lock (one short statement each), so the
   * per-host count holds across replicas. In the same transaction a job whose lease passed after
   * its last attempt (`maxAttempts`) is failed for good.
   */
  claimDue(
    db: Kysely<DB>,
    c: { token: string; leaseMs: number; perTargetCap: number; maxAttempts: number },
  ): Promise<DeliveryRow | undefined> {
    return db.transaction().execute(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(hashtext('underground_bus_deliveries claim'))`.execute(trx);
      await trx
        .updateTable('underground_bus_deliveries')
        .set({
          state: 'failed',
          last_error: 'the worker of the last attempt stopped before recording its outcome',
          locked_by: null,
          lease_until: null,
        })
        .where('state', '=', 'pending')
        .where('lease_until', '<=', sql<Date>`now()`)
        .where('attempts', '>=', c.maxAttempts)
        .execute();
      const r = await sql<DeliveryRow>`
        UPDATE underground_bus_deliveries d
           SET attempts = d.attempts + 1, locked_by = ${c.token},
               lease_until = now() + make_interval(secs => ${c.leaseMs / 1000})
         WHERE d.id = (
           SELECT j.id FROM underground_bus_deliveries j
            WHERE j.state = 'pending' AND j.next_attempt_at <= now()
              AND (j.lease_until IS NULL OR j.lease_until <= now())
              AND j.attempts < ${c.maxAttempts}
              AND (SELECT count(*) FROM underground_bus_deliveries f
                    WHERE f.target_host = j.target_host AND f.lease_until > now()) < ${c.perTargetCap}
            ORDER BY j.next_attempt_at, j.id
            LIMIT 1
            FOR UPDATE SKIP LOCKED)
        RETURNING d.id, d.message_id, d.target, d.payload, d.attempts`.execute(trx);
      return r.rows[0];
    });
  },

  /** The webhook took it (fenced by the claim's token: nothing changes when the claim was lost). */
  async markDelivered(db: Conn, id: number, token: string): Promise<boolean> {
    const r = await db
      .updateTable('underground_bus_deliveries')
      .set({ state: 'delivered', last_error: null, delivered_at: sql<Date>`now()`, locked_by: null, lease_until: null })
      .where('id', '=', id)
      .where('locked_by', '=', token)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },

  /** A failed attempt: pending again after `retryInMs`, or failed for good after the last one (fenced by the token). */
  async markFailed(db: Conn, id: number, token: string, error: string, retryInMs: number | null): Promise<boolean> {
    const r = await db
      .updateTable('underground_bus_deliveries')
      .set({
        state: retryInMs === null ? 'failed' : 'pending',
        last_error: error.slice(0, 500),
        next_attempt_at: sql<Date>`now() + make_interval(secs => ${(retryInMs ?? 0) / 1000})`,
        locked_by: null,
        lease_until: null,
      })
      .where('id', '=', id)
      .where('locked_by', '=', token)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },

  /** Gives a claim back (its worker is stopping and aborted the call): the attempt is not counted, the job is due at once. */
  async release(db: Conn, id: number, token: string): Promise<boolean> {
    const r = await db
      .updateTable('underground_bus_deliveries')
      .set({ attempts: sql<number>`greatest(attempts - 1, 0)`, locked_by: null, lease_until: null })
      .where('id', '=', id)
      .where('locked_by', '=', token)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },
};
