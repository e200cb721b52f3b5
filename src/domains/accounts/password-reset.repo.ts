/**
 * SQL of password reset (password-reset.service.ts, migration 160). Everything runs on the owner
 * connection: the request and the confirm come before anyone is signed in, and the table has no
 * row-level policy for the request role at all.
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';

type Conn = Kysely<DB> | Tx;

export const passwordResetRepo = {
  /** The account an email names (case-insensitive, like sign-in), with whether it has a password and a proved address. */
  findUserByEmail(db: Conn, email: string) {
    return db
      .selectFrom('users')
      .select(['id', 'email', 'email_verified', sql<boolean>`password_hash is not null`.as('has_password')])
      .where(sql<string>`lower(email)`, '=', email.toLowerCase())
      .executeTakeFirst();
  },

  /** Orders the link requests of one user (a transaction's row lock): two parallel requests mail one link, not two. */
  lockUser(trx: Tx, userId: string) {
    return trx.selectFrom('users').select('id').where('id', '=', userId).forNoKeyUpdate().executeTakeFirst();
  },

  /**
   * Whether a live link of the user expires after `after` and no later than `latest` (one mailed
   * recently: its expiry tells when; an admin's link expires later than any mailed one).
   */
  async hasLiveLinkExpiringBetween(db: Conn, userId: string, after: Date, latest: Date): Promise<boolean> {
    const row = await db
      .selectFrom('password_reset_tokens')
      .select('id')
      .where('user_id', '=', userId)
      .where('used_at', 'is', null)
      .where('expires_at', '>', after)
      .where('expires_at', '<=', latest)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  },

  /** The user row locked (as lockUser), with its email and whether it has a password or a proved address. */
  lockUserWithFacts(trx: Tx, userId: string) {
    return trx
      .selectFrom('users')
      .select(['id', 'email', 'email_verified', sql<boolean>`password_hash is not null`.as('has_password')])
      .where('id', '=', userId)
      .forNoKeyUpdate()
      .executeTakeFirst();
  },

  insertToken(db: Conn, row: { userId: string; tokenHash: Buffer; expiresAt: Date }) {
    return db
      .insertInto('password_reset_tokens')
      .values({ user_id: row.userId, token_hash: row.tokenHash, expires_at: row.expiresAt })
      .execute();
  },

  /** A link whose mail could not be sent: forgotten, so the next request mails a new one at once. */
  deleteToken(db: Conn, tokenHash: Buffer) {
    return db.deleteFrom('password_reset_tokens').where('token_hash', '=', tokenHash).execute();
  },

  /**
   * Spends a live token: one UPDATE that only matches an unused, unexpired row, so of any number
   * of concurrent confirms with one token exactly one gets the row back (the row lock makes the
   * others re-check `used_at` and match nothing).
   */
  spendToken(db: Conn, tokenHash: Buffer, now: Date) {
    return db
      .updateTable('password_reset_tokens')
      .set({ used_at: now })
      .where('token_hash', '=', tokenHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .returning(['user_id'])
      .executeTakeFirst();
  },

  /** Why a token could not be spent (for the 400's wording): unknown, used or expired. */
  findToken(db: Conn, tokenHash: Buffer) {
    return db.selectFrom('password_reset_tokens').select(['used_at', 'expires_at']).where('token_hash', '=', tokenHash).executeTakeFirst();
  },

  /** Spends every other outstanding link of a user (after a reset, or a password change). */
  spendAllOf(db: Conn, userId: string, now: Date) {
    return db
      .updateTable('password_reset_tokens')
      .set({ used_at: now })
      .where('user_id', '=', userId)
      .where('used_at', 'is', null)
      .execute();
  },

  setPasswordHash(db: Conn, userId: string, passwordHash: string) {
    return db.updateTable('users').set({ password_hash: passwordHash, updated_at: sql`now()` }).where('id', '=', userId).execute();
  },

  deleteSessionsOfUser(db: Conn, userId: string) {
    return db.deleteFrom('sessions').where('user_id', '=', userId).execute();
  },

  /** Purge job: links past their expiry are of no use to anyone (kept a day for the 400's wording). */
  deleteExpired(db: Conn, before: Date) {
    return db.deleteFrom('password_reset_tokens').where('expires_at', '<', before).executeTakeFirst();
  },
};
