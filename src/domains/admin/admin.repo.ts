/**
 * Admin data. Runs on the owner connection (`db.kysely`): an admin's view of users crosses
 * users by design, so it cannot run under one user's row-level security context. Every caller
 * has checked admin rights first (admin.service.ts).
 */
import { type Kysely, sql } from 'kysely';
import type { DB } from '../../db/schema.ts';

export type Plan = 'solo' | 'collective' | 'label' | 'network';

/**
 * The operator account of backend calls without a user (migration 040) is not a person; it is the
 * actor of what an operator does from a shell (`npm run admin -- credit`).
 */
export const OPERATOR_ID = '00000000-0000-0000-0000-000000000001';

const userColumns = ['id', 'email', 'name', 'plan', 'subscription_status', 'is_admin', 'email_verified', 'created_at'] as const;

export const adminRepo = {
  hasAdmin(db: Kysely<DB>) {
    return db
      .selectFrom('users')
      .select('id')
      .where('is_admin', '=', true)
      .limit(1)
      .executeTakeFirst()
      .then((r) => r !== undefined);
  },

  /** Replaces any earlier setup token (only the newest printed link works). */
  async replaceSetupToken(db: Kysely<DB>, tokenHash: Buffer, expiresAt: Date) {
    await db.transaction().execute(async (trx) => {
      await trx.deleteFrom('admin_setup_tokens').execute();
      await trx.insertInto('admin_setup_tokens').values({ token_hash: tokenHash, expires_at: expiresAt }).execute();
    });
  },

  /**
   * Spends the token and makes `userId` an admin, in one transaction: the DELETE … RETURNING
   * lets exactly one of two concurrent openers win.
   */
  async spendSetupToken(db: Kysely<DB>, tokenHash: Buffer, userId: string): Promise<boolean> {
    return db.transaction().execute(async (trx) => {
      const spent = await trx
        .deleteFrom('admin_setup_tokens')
        .where('token_hash', '=', tokenHash)
        .where('expires_at', '>', sql<Date>`now()`)
        .returning('token_hash')
        .executeTakeFirst();
      if (!spent) return false;
      await trx.updateTable('users').set({ is_admin: true, updated_at: sql`now()` }).where('id', '=', userId).execute();
      return true;
    });
  },

  listUsers(db: Kysely<DB>, limit: number, offset: number) {
    return db
      .selectFrom('users')
      .select(userColumns)
      .where('id', '!=', OPERATOR_ID)
      .orderBy('created_at', 'desc')
      .limit(limit)
      .offset(offset)
      .execute();
  },

  countUsers(db: Kysely<DB>) {
    return db
      .selectFrom('users')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('id', '!=', OPERATOR_ID)
      .executeTakeFirstOrThrow()
      .then((r) => Number(r.n));
  },

  updateUser(db: Kysely<DB>, id: string, changes: { plan?: Plan | undefined; is_admin?: boolean | undefined }) {
    return db
      .updateTable('users')
      .set({
        ...(changes.plan ? { plan: changes.plan } : {}),
        ...(changes.is_admin !== undefined ? { is_admin: changes.is_admin } : {}),
        updated_at: sql`now()`,
      })
      .where('id', '=', id)
      .where('id', '!=', OPERATOR_ID)
      .returning(userColumns)
      .executeTakeFirst();
  },

  /** The account an admin credit goes to: any user but the operator account. */
  findUser(db: Kysely<DB>, id: string) {
    return db.selectFrom('users').select(['id', 'email']).where('id', '=', id).where('id', '!=', OPERATOR_ID).executeTakeFirst();
  },

  findUserByEmail(db: Kysely<DB>, email: string) {
    return db
      .selectFrom('users')
      .select(['id', 'email'])
      .where(sql<string>`lower(email)`, '=', email.trim().toLowerCase())
      .where('id', '!=', OPERATOR_ID)
      .executeTakeFirst();
  },

  setAdminByEmail(db: Kysely<DB>, email: string, isAdmin: boolean) {
    return db
      .updateTable('users')
      .set({ is_admin: isAdmin, updated_at: sql`now()` })
      .where(sql<string>`lower(email)`, '=', email.trim().toLowerCase())
      .where('id', '!=', OPERATOR_ID)
      .returning(['id', 'email', 'is_admin'])
      .executeTakeFirst();
  },
};
