/**
 * SQL of the x402 domain: the payment audit (migration 180), whose functions run inside
 * `db.withUser` (row-level security lets the user add and read their own rows, never change
 * them), and the two lookups a `pay` charge needs on the owner connection, where the ledger's
 * money tables are (docs/payments.md "Who may touch the money tables").
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';

export type X402AuditOutcome = 'attempted' | 'accepted' | 'refused' | 'failed';

export type X402AuditRow = {
  attemptId: string;
  userId: string;
  userEmail: string;
  agentId: string | null;
  /** US dollars; null when the request's amount was not a finite number */
  amount: number | null;
  currency: string | null;
  recipient: string | null;
  endpoint: string | null;
  method: string | null;
  outcome: X402AuditOutcome;
  error?: string | null;
  upstreamStatus?: number | null;
  x402Paid?: boolean;
};

/** Keeps a refused request's free text inside the table's CHECKs (an over-long field is refused, not stored whole). */
const cut = (v: string | null, max: number) => (v === null ? null : v.slice(0, max));

export const x402Repo = {
  /** Owner connection: the user's session wallet, whose ledger balance pays their x402 calls. */
  async sessionWalletAddress(db: Kysely<DB>, userId: string): Promise<string | undefined> {
    const row = await db.selectFrom('session_wallets').select('address').where('user_id', '=', userId).executeTakeFirst();
    return row?.address.toLowerCase();
  },

  /**
   * Takes the user's x402 charge lock until the transaction ends: a charge reads what the user
   * spent today and then debits, so two parallel charges must not both read the same total.
   */
  async lockUserCharges(trx: Kysely<DB>, userId: string): Promise<void> {
    await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`x402_pay:${userId}`}, 0))`.execute(trx);
  },

  insertAudit(trx: Tx, row: X402AuditRow) {
    return trx
      .insertInto('x402_payments_audit')
      .values({
        attempt_id: row.attemptId,
        user_id: row.userId,
        user_email: row.userEmail,
        agent_id: cut(row.agentId, 200),
        // numeric(20, 6): amounts out of range are recorded as null (they are refused anyway)
        amount: row.amount !== null && Math.abs(row.amount) < 1e14 ? row.amount.toFixed(6) : null,
        currency: cut(row.currency, 64),
        recipient: cut(row.recipient, 200),
        endpoint: cut(row.endpoint, 200),
        method: cut(row.method, 64),
        outcome: row.outcome,
        error: cut(row.error ?? null, 500),
        upstream_status: row.upstreamStatus ?? null,
        x402_paid: row.x402Paid ?? false,
      })
      .execute();
  },

  /** The user's own audit rows, newest first (row-level security adds `user_id = app.user_id`). */
  listOwn(trx: Tx, limit: number) {
    return trx.selectFrom('x402_payments_audit').selectAll().orderBy('id', 'desc').limit(limit).execute();
  },
};
