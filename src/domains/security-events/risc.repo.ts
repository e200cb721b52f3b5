/**
 * SQL of the security event receivers (§6). Owner connection only: tokens arrive without a session
 * and name users across every account (migration 150 keeps the request role out of risc_events).
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/types.gen.ts';

type Conn = Kysely<DB> | Tx;

export type NewRiscEvent = {
  jti: string;
  receiver: 'primary' | 'legacy';
  issuer: string;
  events: Record<string, unknown>;
  legacyEmail: string | null;
};

export type RiscEventRow = {
  jti: string;
  receiver: 'primary' | 'legacy';
  events: Record<string, unknown>;
  legacy_email: string | null;
  attempts: number;
};

export const riscRepo = {
  /** Records a verified event; false when its jti was seen before (§6 deduplication). */
  async record(db: Conn, e: NewRiscEvent): Promise<boolean> {
    const r = await db
      .insertInto('risc_events')
      .values({
        jti: e.jti,
        receiver: e.receiver,
        issuer: e.issuer,
        events: JSON.stringify(e.events),
        legacy_email: e.legacyEmail,
      })
      .onConflict((oc) => oc.column('jti').doNothing())
      .returning('jti')
      .executeTakeFirst();
    return r !== undefined;
  },

  /** The oldest due pending event, locked for this transaction; other workers skip it. */
  takeDue(trx: Tx): Promise<RiscEventRow | undefined> {
    return trx
      .selectFrom('risc_events')
      .select(['jti', 'receiver', 'events', 'legacy_email', 'attempts'])
      .where('state', '=', 'pending')
      .where('next_attempt_at', '<=', sql<Date>`now()`)
      .orderBy('received_at')
      .orderBy('jti')
      .limit(1)
      .forUpdate()
      .skipLocked()
      .executeTakeFirst() as Promise<RiscEventRow | undefined>;
  },

  markDone(trx: Tx, jti: string, outcome: unknown) {
    return trx
      .updateTable('risc_events')
      .set({
        state: 'done',
        attempts: sql<number>`attempts + 1`,
        outcome: JSON.stringify(outcome),
        last_error: null,
        processed_at: sql<Date>`now()`,
      })
      .where('jti', '=', jti)
      .execute();
  },

  /** A failed attempt: pending again after `retryInMs`, or failed for good after the last one. */
  markFailed(trx: Tx, jti: string, error: string, retryInMs: number | null) {
    return trx
      .updateTable('risc_events')
      .set({
        state: retryInMs === null ? 'failed' : 'pending',
        attempts: sql<number>`attempts + 1`,
        last_error: error.slice(0, 500),
        next_attempt_at: sql<Date>`now() + make_interval(secs => ${(retryInMs ?? 0) / 1000})`,
      })
      .where('jti', '=', jti)
      .execute();
  },

  /** Users named by the provider's subject id: their linked identity-provider account. */
  async usersBySubject(db: Conn, sub: string): Promise<string[]> {
    const rows = await db
      .selectFrom('linked_accounts')
      .select('user_id')
      .where('provider', '=', 'idp')
      .where('subject', '=', sub)
      .execute();
    return rows.map((r) => r.user_id);
  },

  async usersByEmail(db: Conn, email: string): Promise<string[]> {
    const rows = await db.selectFrom('users').select('id').where(sql<string>`lower(email)`, '=', email.toLowerCase()).execute();
    return rows.map((r) => r.id);
  },

  /** Identity-provider sign-in refused from now on (the first disable's time is kept). */
  disableIdpSignIn(db: Conn, userId: string) {
    return db
      .updateTable('users')
      .set({ idp_signin_disabled_at: sql<Date>`coalesce(idp_signin_disabled_at, now())` })
      .where('id', '=', userId)
      .execute();
  },

  enableIdpSignIn(db: Conn, userId: string) {
    return db.updateTable('users').set({ idp_signin_disabled_at: null }).where('id', '=', userId).execute();
  },

  /** Forgets the identity provider's refresh tokens stored for the user (the provider revoked them). */
  dropIdpRefreshTokens(db: Conn, userId: string) {
    return db
      .updateTable('linked_accounts')
      .set({ refresh_token_enc: null, updated_at: sql<Date>`now()` })
      .where('user_id', '=', userId)
      .where('provider', '=', 'idp')
      .execute();
  },
};
