/**
 * SQL of linked external accounts (§2 "Linked external account"). Sign-in finds and links before
 * anyone is authenticated, so those functions take the owner connection (`Kysely<DB>` or a
 * transaction on it); listing a user's own links runs under `db.withUser` (row-level security,
 * migration 140).
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';
import type { ExternalProvider } from './oauth-state.rules.ts';

type Conn = Kysely<DB> | Tx;

/** What sign-in needs to know about a user: whether identity-provider sign-in is refused (§6). */
const signInColumns = [
  'users.id',
  'users.name',
  'users.email',
  'users.email_verified',
  'users.idp_signin_disabled_at',
  'users.idp_sign_in_disabled',
] as const;

export const linkedAccountsRepo = {
  findUserByLink(db: Conn, provider: ExternalProvider, subject: string) {
    return db
      .selectFrom('linked_accounts')
      .innerJoin('users', 'users.id', 'linked_accounts.user_id')
      .select(signInColumns)
      .where('linked_accounts.provider', '=', provider)
      .where('linked_accounts.subject', '=', subject)
      .executeTakeFirst();
  },

  findUserByEmail(db: Conn, email: string) {
    return db.selectFrom('users').select(signInColumns).where(sql<string>`lower(email)`, '=', email.toLowerCase()).executeTakeFirst();
  },

  /**
   * The provider vouched for the address: the user has proved they own it. true when this is the
   * first proof (the row lock makes one of two parallel sign-ins the first, the other finds it done).
   */
  async markEmailVerified(db: Conn, userId: string): Promise<boolean> {
    const row = await db
      .updateTable('users')
      .set({ email_verified: true, updated_at: sql`now()` })
      .where('id', '=', userId)
      .where('email_verified', '=', false)
      .returning('id')
      .executeTakeFirst();
    return row !== undefined;
  },

  /**
   * The first proof of an address held by a password account: the password, set before anyone
   * proved the address, stops working (it may be a stranger's). true when there was one.
   */
  async clearPassword(db: Conn, userId: string): Promise<boolean> {
    const row = await db
      .updateTable('users')
      .set({ password_hash: null, updated_at: sql`now()` })
      .where('id', '=', userId)
      .where('password_hash', 'is not', null)
      .returning('id')
      .executeTakeFirst();
    return row !== undefined;
  },

  /**
   * Links (provider, subject) to the user, or refreshes the link's email and refresh token. The
   * unique (provider, subject) decides races; a link that already names another user is left as
   * it is (the returned user id says whose it is).
   */
  async upsertLink(
    db: Conn,
    link: { userId: string; provider: ExternalProvider; subject: string; email: string | null; refreshTokenEnc: string | null },
  ): Promise<string> {
    const row = await db
      .insertInto('linked_accounts')
      .values({
        user_id: link.userId,
        provider: link.provider,
        subject: link.subject,
        email: link.email,
        refresh_token_enc: link.refreshTokenEnc,
      })
      .onConflict((oc) =>
        oc.columns(['provider', 'subject']).doUpdateSet((eb) => ({
          email: eb.ref('excluded.email'),
          // a sign-in without a new refresh token (the provider issues one only on consent) keeps the old one
          refresh_token_enc: sql`coalesce(excluded.refresh_token_enc, linked_accounts.refresh_token_enc)`,
          updated_at: sql`now()`,
        })),
      )
      .returning('user_id')
      .executeTakeFirstOrThrow();
    return row.user_id;
  },

  /** A signed-in user's own links (under row-level security); never the refresh token. */
  listForUser(trx: Tx, userId: string) {
    return trx
      .selectFrom('linked_accounts')
      .select(['id', 'provider', 'email', 'created_at'])
      .where('user_id', '=', userId)
      .orderBy('created_at')
      .execute();
  },
};
