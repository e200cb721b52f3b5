/** SQL of the calendar domain. Every function runs inside `db.withUser`: row-level security applies. */
import { sql } from 'kysely';
import type { Tx } from '../../db/client.ts';

export type ConnectionRow = {
  calendar_id: string;
  timezone: string;
  access_token_enc: string;
  refresh_token_enc: string | null;
  access_expires_at: Date;
};

export const calendarRepo = {
  find(trx: Tx, userId: string): Promise<ConnectionRow | undefined> {
    return trx
      .selectFrom('calendar_connections')
      .select(['calendar_id', 'timezone', 'access_token_enc', 'refresh_token_enc', 'access_expires_at'])
      .where('user_id', '=', userId)
      .executeTakeFirst();
  },

  async exists(trx: Tx, userId: string): Promise<boolean> {
    const row = await trx
      .selectFrom('calendar_connections')
      .select(sql<number>`1`.as('one'))
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return row !== undefined;
  },

  /**
   * Insert or replace (one connection per user, the primary key). A reconnect that brings no new
   * refresh token keeps the stored one: providers issue it only on the first consent.
   */
  upsert(trx: Tx, userId: string, row: ConnectionRow) {
    return trx
      .insertInto('calendar_connections')
      .values({ user_id: userId, ...row })
      .onConflict((oc) =>
        oc.column('user_id').doUpdateSet({
          calendar_id: row.calendar_id,
          timezone: row.timezone,
          access_token_enc: row.access_token_enc,
          refresh_token_enc: sql`coalesce(excluded.refresh_token_enc, calendar_connections.refresh_token_enc)`,
          access_expires_at: row.access_expires_at,
          updated_at: sql`now()`,
        }),
      )
      .execute();
  },

  /** A refreshed access token (and the rotated refresh token, when the provider sent one). */
  saveTokens(trx: Tx, userId: string, accessTokenEnc: string, expiresAt: Date, refreshTokenEnc: string | undefined) {
    return trx
      .updateTable('calendar_connections')
      .set({
        access_token_enc: accessTokenEnc,
        access_expires_at: expiresAt,
        ...(refreshTokenEnc ? { refresh_token_enc: refreshTokenEnc } : {}),
        updated_at: sql`now()`,
      })
      .where('user_id', '=', userId)
      .execute();
  },

  remove(trx: Tx, userId: string) {
    return trx.deleteFrom('calendar_connections').where('user_id', '=', userId).execute();
  },

  /**
   * Records a connect state's nonce as used (migration 210); false when it was used before: the
   * primary key decides, so two callbacks with one state cannot both pass. The user's states
   * past their expiry go first: they can no longer verify, so their rows are only dead weight.
   */
  async spendState(trx: Tx, userId: string, nonce: string, expiresAt: Date): Promise<boolean> {
    await trx.deleteFrom('calendar_spent_states').where('user_id', '=', userId).where('expires_at', '<', sql<Date>`now()`).execute();
    const row = await trx
      .insertInto('calendar_spent_states')
      .values({ nonce, user_id: userId, expires_at: expiresAt })
      .onConflict((oc) => oc.column('nonce').doNothing())
      .returning('nonce')
      .executeTakeFirst();
    return row !== undefined;
  },
};
