/**
 * SQL of the payments ledger (migration 020, docs/payments.md). Everything runs on the owner
 * connection: wallet balances are keyed by address, not by user, and are reached by processor
 * webhooks and payment-session bearers that carry no user context. The database itself keeps the
 * invariants (append-only journal, balances moved only by the journal's trigger, CHECKs,
 * UNIQUEs), so no statement here can break them.
 */
import { type Kysely, sql } from 'kysely';
import type { DB } from '../../../db/schema.ts';

type Q = Kysely<DB>;

export const ledgerRepo = {
  /**
   * Credits once per event id: a replayed event inserts nothing and returns undefined. Nor does
   * it credit when a row already carries one of `priorEventIds` (the same payment recorded under
   * the id an earlier version keyed it by).
   */
  async credit(
    db: Q,
    e: {
      address: string;
      amountMicros: number;
      eventId: string;
      source: string;
      priorEventIds?: string[] | undefined;
      note?: string | null | undefined;
      actorUserId?: string | null | undefined;
    },
  ) {
    const r = await sql<{ id: number }>`
      INSERT INTO ledger_entries (kind, address, wallet_delta, event_id, source, note, actor_user_id)
      SELECT 'credit', ${e.address}, ${e.amountMicros}, ${e.eventId}, ${e.source}, ${e.note ?? null}, ${e.actorUserId ?? null}
       WHERE NOT EXISTS (SELECT 1 FROM ledger_entries WHERE event_id = ANY(${e.priorEventIds ?? []}::text[]))
      ON CONFLICT (event_id) DO NOTHING
      RETURNING id`.execute(db);
    return r.rows[0];
  },

  /**
   * Debits a wallet once per reference. Returns undefined when the reference was already used;
   * a balance that would go below zero raises a check violation (23514).
   */
  async debit(db: Q, e: { address: string; amountMicros: number; reference: string; source: string }) {
    const r = await sql<{ id: number }>`
      INSERT INTO ledger_entries (kind, address, wallet_delta, event_id, source)
      VALUES ('debit', ${e.address}, ${-e.amountMicros}, ${e.reference}, ${e.source})
      ON CONFLICT (event_id) DO NOTHING
      RETURNING id`.execute(db);
    return r.rows[0];
  },

  /**
   * Adds a batch's model-call cost (1e-10 USD) to the wallet's running total (migration 220) and
   * debits the micro-dollars that total crossed, at most what the balance holds (a call's hold
   * covered its cost, so it does unless an estimate was short), under `eventId`. Returns the
   * micro-dollars debited (0: the batch crossed no whole micro-dollar; the next one pays it).
   */
  async chargeUsage(db: Q, c: { address: string; costUnits: number; eventId: string }): Promise<number> {
    const t = await sql<{ micros: string }>`
      INSERT INTO ai_billing_totals AS t (address, cost_units) VALUES (${c.address}, ${String(c.costUnits)}::numeric)
      ON CONFLICT (address) DO UPDATE SET cost_units = t.cost_units + EXCLUDED.cost_units, updated_at = now()
      RETURNING (floor(t.cost_units / 10000) - floor((t.cost_units - ${String(c.costUnits)}::numeric) / 10000))::text AS micros`.execute(
      db,
    );
    const crossed = Number(t.rows[0]!.micros);
    if (crossed <= 0) return 0;
    const r = await sql<{ debited: string }>`
      WITH w AS (SELECT least(${crossed}::bigint, coalesce((SELECT balance_micros FROM wallet_balances WHERE address = ${c.address} FOR UPDATE), 0)) AS amount)
      INSERT INTO ledger_entries (kind, address, wallet_delta, event_id, source)
      SELECT 'debit', ${c.address}, -w.amount, ${c.eventId}, 'ai_usage' FROM w WHERE w.amount > 0
      ON CONFLICT (event_id) DO NOTHING
      RETURNING (-wallet_delta)::text AS debited`.execute(db);
    return Number(r.rows[0]?.debited ?? 0);
  },

  /**
   * What the wallet's rows of these sources took from it since midnight UTC (debits minus
   * refunds), by the database's clock: a daily spending cap's measure.
   */
  async spentToday(db: Q, address: string, sources: string[]): Promise<number> {
    const r = await sql<{ spent: string }>`
      SELECT coalesce(-sum(wallet_delta), 0)::text AS spent FROM ledger_entries
       WHERE address = ${address} AND source = ANY(${sources}::text[])
         AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`.execute(db);
    return Number(r.rows[0]!.spent);
  },

  async balance(db: Q, address: string): Promise<number> {
    const row = await db.selectFrom('wallet_balances').select('balance_micros').where('address', '=', address).executeTakeFirst();
    return row?.balance_micros ?? 0;
  },

  entryByEvent(db: Q, eventId: string) {
    return db.selectFrom('ledger_entries').selectAll().where('event_id', '=', eventId).executeTakeFirst();
  },

  /**
   * A wallet's balance right after journal row `id`: the sum of its rows up to it (the balance is
   * that sum by construction, migration 020), so it reads the same whenever it is asked.
   */
  async balanceAfter(db: Q, address: string, id: number): Promise<number> {
    const r = await sql<{ b: string }>`
      SELECT coalesce(sum(wallet_delta), 0)::text AS b FROM ledger_entries WHERE address = ${address} AND id <= ${id}`.execute(db);
    return Number(r.rows[0]!.b);
  },

  /**
   * The rows that moved a wallet's balance (session debits move only the session and are left
   * out), newest first, with the balance after each; `before` pages by row id.
   */
  async journal(db: Q, address: string, page: { limit: number; before?: number | undefined }) {
    const r = await sql<{
      id: number;
      kind: string;
      wallet_delta: string;
      source: string | null;
      note: string | null;
      plugin: string | null;
      created_at: Date;
      balance_after: string;
    }>`
      SELECT * FROM (
        SELECT id, kind, wallet_delta::text, source, note, plugin, created_at,
               (sum(wallet_delta) OVER (ORDER BY id))::text AS balance_after
          FROM ledger_entries
         WHERE address = ${address} AND wallet_delta <> 0) j
       WHERE ${page.before ?? null}::bigint IS NULL OR id < ${page.before ?? null}::bigint
       ORDER BY id DESC
       LIMIT ${page.limit}`.execute(db);
    return r.rows.map((x) => ({ ...x, id: Number(x.id), wallet_delta: Number(x.wallet_delta), balance_after: Number(x.balance_after) }));
  },

  /**
   * Every wallet and session whose stored amount differs from the sum of its journal rows. Empty
   * when the ledger is consistent (the audit behind docs/payments.md "The ledger").
   */
  async mismatches(db: Q) {
    const r = await sql<{ kind: string; key: string; stored: string; journal: string }>`
      SELECT 'wallet' AS kind, w.address AS key, w.balance_micros::text AS stored, coalesce(j.total, 0)::text AS journal
        FROM wallet_balances w
        LEFT JOIN (SELECT address, sum(wallet_delta) AS total FROM ledger_entries GROUP BY address) j USING (address)
       WHERE w.balance_micros <> coalesce(j.total, 0)
      UNION ALL
      SELECT 'wallet', j.address, '0', j.total::text
        FROM (SELECT address, sum(wallet_delta) AS total FROM ledger_entries GROUP BY address) j
       WHERE j.total <> 0 AND NOT EXISTS (SELECT 1 FROM wallet_balances w WHERE w.address = j.address)
      UNION ALL
      SELECT 'session', s.id::text, s.remaining_micros::text, coalesce(j.total, 0)::text
        FROM payment_sessions s
        LEFT JOIN (SELECT session_id, sum(session_delta) AS total, count(*) FILTER (WHERE kind = 'session_debit') AS debits
                     FROM ledger_entries WHERE session_id IS NOT NULL GROUP BY session_id) j ON j.session_id = s.id
       WHERE s.remaining_micros <> coalesce(j.total, 0) OR s.debit_count <> coalesce(j.debits, 0)`.execute(db);
    return r.rows;
  },
};
