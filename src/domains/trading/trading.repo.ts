/** SQL of the trading domain. Every function runs inside `db.withUser`: row-level security applies. */
import { sql } from 'kysely';
import type { Tx } from '../../db/client.ts';

export const tradingRepo = {
  findKey(trx: Tx, userId: string) {
    return trx.selectFrom('trading_keys').select(['encrypted_key']).where('user_id', '=', userId).executeTakeFirst();
  },

  async hasKey(trx: Tx, userId: string): Promise<boolean> {
    const row = await trx.selectFrom('trading_keys').select(sql<number>`1`.as('one')).where('user_id', '=', userId).executeTakeFirst();
    return row !== undefined;
  },

  /** Insert or replace: one row per user (primary key), so concurrent saves leave the last one. */
  upsertKey(trx: Tx, userId: string, encryptedKey: string) {
    return trx
      .insertInto('trading_keys')
      .values({ user_id: userId, encrypted_key: encryptedKey })
      .onConflict((oc) => oc.column('user_id').doUpdateSet({ encrypted_key: encryptedKey, updated_at: sql`now()` }))
      .execute();
  },

  deleteKey(trx: Tx, userId: string) {
    return trx.deleteFrom('trading_keys').where('user_id', '=', userId).execute();
  },
};
