/**
 * SQL of the API key domain (§4.3). Owner operations (list, get, create, delete) take the
 * RLS-bound transaction from `db.withUser`. Validation takes the owner connection (`Kysely<DB>`)
 * because it runs before any user is known: the key itself is what identifies the user, so
 * there is no user context to set yet. It is one indexed lookup by prefix.
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';

const publicColumns = ['id', 'name', 'prefix', 'created_at', 'last_used_at'] as const;

export const keysRepo = {
  list(trx: Tx, userId: string) {
    return trx
      .selectFrom('api_keys')
      .select(publicColumns)
      .where('user_id', '=', userId)
      .orderBy('created_at', 'desc')
      .orderBy('id')
      .execute();
  },

  find(trx: Tx, userId: string, id: string) {
    return trx.selectFrom('api_keys').select(publicColumns).where('user_id', '=', userId).where('id', '=', id).executeTakeFirst();
  },

  insert(trx: Tx, key: { userId: string; name: string; prefix: string; keyHash: Buffer }) {
    return trx
      .insertInto('api_keys')
      .values({ user_id: key.userId, name: key.name, prefix: key.prefix, key_hash: key.keyHash })
      .returning(['id', 'name', 'created_at'])
      .executeTakeFirstOrThrow();
  },

  async delete(trx: Tx, userId: string, id: string): Promise<boolean> {
    const r = await trx.deleteFrom('api_keys').where('user_id', '=', userId).where('id', '=', id).executeTakeFirst();
    return r.numDeletedRows > 0n;
  },

  /** Every key of the user; returns how many went. */
  async deleteAllOf(trx: Tx, userId: string): Promise<number> {
    const r = await trx.deleteFrom('api_keys').where('user_id', '=', userId).executeTakeFirst();
    return Number(r.numDeletedRows);
  },

  /** Owner connection (see the file comment): candidate keys sharing the lookup prefix, with their owner's profile. */
  findByPrefix(db: Kysely<DB>, prefix: string) {
    return db
      .selectFrom('api_keys')
      .innerJoin('users', 'users.id', 'api_keys.user_id')
      .select([
        'api_keys.id',
        'api_keys.key_hash',
        'api_keys.last_used_at',
        'users.id as user_id',
        'users.email',
        'users.plan',
        'users.subscription_status',
        'users.is_admin',
        'users.email_verified',
        'users.password_predates_verification',
      ])
      .where('api_keys.prefix', '=', prefix)
      .execute();
  },

  /** Owner connection: records a use of the key (§2 `lastUsed`). */
  touch(db: Kysely<DB>, id: string) {
    return db.updateTable('api_keys').set({ last_used_at: sql`now()` }).where('id', '=', id).execute();
  },
};
