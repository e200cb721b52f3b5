/**
 * SQL of payment sessions (§4.8 session billing, docs/payments.md). Owner connection, like the
 * ledger (see ../ledger/ledger.repo.ts): a session is reached by its bearer id, not by a signed-in user.
 * Every change of money is one journal row; the journal's trigger moves the session's remainder
 * and the wallet's balance (migration 020).
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../../db/client.ts';
import type { DB } from '../../../db/schema.ts';

type Q = Kysely<DB> | Tx;

export type SessionRow = {
  id: string;
  address: string;
  deposit_micros: number;
  remaining_micros: number;
  debit_count: number;
  status: 'active' | 'closed' | 'expired';
  expires_at: Date;
  created_at: Date;
  ended_at: Date | null;
  /** true while active and not past expires_at (the database's clock) */
  usable: boolean;
};

const sessionColumns = sql`id, address, deposit_micros, remaining_micros, debit_count, status, expires_at, created_at, ended_at,
  (status = 'active' AND expires_at > now()) AS usable`;

export const sessionsRepo = {
  /**
   * Opens a session funded from the wallet's balance: the session row, then the `session_open`
   * journal row that moves the deposit (its trigger refuses an overdraft with a check violation).
   * Run inside a transaction.
   */
  async open(
    trx: Tx,
    s: { tokenHash: Buffer; address: string; userId: string | null; depositMicros: number; ttlMs: number; openSalt: string | null },
  ) {
    const r = await sql<{ id: string }>`
      INSERT INTO payment_sessions (token_hash, address, user_id, deposit_micros, expires_at, open_salt)
      VALUES (${s.tokenHash}, ${s.address}, ${s.userId}, ${s.depositMicros}, now() + make_interval(secs => ${s.ttlMs / 1000}), ${s.openSalt})
      RETURNING id`.execute(trx);
    const id = r.rows[0]!.id;
    await sql`INSERT INTO ledger_entries (kind, address, session_id, wallet_delta, session_delta, source)
      VALUES ('session_open', ${s.address}, ${id}, ${-s.depositMicros}, ${s.depositMicros}, 'session_open')`.execute(trx);
    return id;
  },

  async byToken(db: Q, tokenHash: Buffer): Promise<SessionRow | undefined> {
    const r = await sql<SessionRow>`SELECT ${sessionColumns} FROM payment_sessions WHERE token_hash = ${tokenHash}`.execute(db);
    return r.rows[0];
  },

  /**
   * The gateway's debit (§4.8 "debits by off-chain voucher"): one statement. It locks the session
   * row, checks it is the caller's, active, unexpired and covers the cost (re-checked on the
   * locked row), and inserts the debit with its nonce and signed receipt; the journal's trigger
   * lowers the remainder. No row back means nothing was debited (the caller finds out why).
   */
  async debit(db: Q, d: { tokenHash: Buffer; address: string; costMicros: number; nonce: string; plugin: string; signature: string }) {
    const r = await sql<{ id: number; session_id: string; remaining_after: number }>`
      INSERT INTO ledger_entries (kind, address, session_id, session_delta, nonce, plugin, signature, remaining_after, source)
      SELECT 'session_debit', s.address, s.id, ${-d.costMicros}, ${d.nonce}, ${d.plugin}, ${d.signature},
             s.remaining_micros - ${d.costMicros}, 'gateway'
        FROM payment_sessions s
       WHERE s.token_hash = ${d.tokenHash} AND s.address = ${d.address} AND s.status = 'active'
         AND s.expires_at > now() AND s.remaining_micros >= ${d.costMicros}
         FOR UPDATE
      RETURNING id, session_id, remaining_after`.execute(db);
    return r.rows[0];
  },

  /** Gives a debit back once (its plugin call failed): to the session while active, else to the wallet. */
  async refund(db: Q, debitId: number) {
    const r = await sql<{ id: number }>`
      INSERT INTO ledger_entries (kind, address, session_id, wallet_delta, session_delta, event_id, source)
      SELECT 'session_refund', e.address, e.session_id,
             CASE WHEN s.status = 'active' THEN 0 ELSE -e.session_delta END,
             CASE WHEN s.status = 'active' THEN -e.session_delta ELSE 0 END,
             'refund:' || e.id, 'plugin_failed'
        FROM ledger_entries e JOIN payment_sessions s ON s.id = e.session_id
       WHERE e.id = ${debitId} AND e.kind = 'session_debit'
         FOR UPDATE OF s
      ON CONFLICT (event_id) DO NOTHING
      RETURNING id`.execute(db);
    return r.rows[0];
  },

  /** Closes an active session, returning its remainder to the wallet; undefined when not active. */
  async close(db: Q, tokenHash: Buffer) {
    const r = await sql<{ session_id: string; returned: number }>`
      INSERT INTO ledger_entries (kind, address, session_id, wallet_delta, session_delta, source)
      SELECT 'session_close', s.address, s.id, s.remaining_micros, -s.remaining_micros, 'session_close'
        FROM payment_sessions s WHERE s.token_hash = ${tokenHash} AND s.status = 'active'
         FOR UPDATE
      RETURNING session_id, wallet_delta AS returned`.execute(db);
    return r.rows[0];
  },

  /**
   * The expiry job (docs/payments.md): ends up to `limit` active sessions past their expires_at,
   * returning each remainder to its wallet. SKIP LOCKED lets several replicas run it at once and
   * never waits on a session a gateway call holds; that session is taken next time.
   */
  async expireDue(db: Q, limit: number): Promise<number> {
    const r = await sql<{ id: number }>`
      INSERT INTO ledger_entries (kind, address, session_id, wallet_delta, session_delta, source)
      SELECT 'session_expire', s.address, s.id, s.remaining_micros, -s.remaining_micros, 'session_expiry_job'
        FROM payment_sessions s
       WHERE s.status = 'active' AND s.expires_at <= now()
       ORDER BY s.expires_at
       LIMIT ${limit}
         FOR UPDATE SKIP LOCKED
      RETURNING id`.execute(db);
    return r.rows.length;
  },

  /** The latest `limit` debits of a session, oldest first (receipts). */
  async debits(db: Q, sessionId: string, limit: number) {
    const rows = await db
      .selectFrom('ledger_entries')
      .select(['id', 'nonce', 'plugin', 'session_delta', 'signature', 'remaining_after', 'created_at'])
      .where('session_id', '=', sessionId)
      .where('kind', '=', 'session_debit')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.reverse();
  },

  /** The signed-in user's own addresses: session wallet, then SIWE sign-in address (RLS-bound). */
  async userAddresses(trx: Tx, userId: string): Promise<string[]> {
    // the session wallet first: its balance is the one GET /api/wallet shows and admins credit
    const r = await sql<{ address: string }>`
      SELECT lower(address) AS address, 0 AS rank FROM session_wallets WHERE user_id = ${userId}
      UNION ALL SELECT lower(wallet_address), 1 FROM users WHERE id = ${userId} AND wallet_address IS NOT NULL
      ORDER BY rank`.execute(trx);
    return [...new Set(r.rows.map((x) => x.address))];
  },
};
