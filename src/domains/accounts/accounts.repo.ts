/**
 * SQL of the accounts domain. Functions taking `Kysely<DB>` run on the owner connection because
 * they must find a user or session before anyone is authenticated (sign-in by email, cookie
 * lookup by token hash, wallet lookup); everything done on behalf of a signed-in user takes the
 * RLS-bound transaction from `db.withUser`.
 */
import { type Kysely, sql } from 'kysely';
import type { Pool } from 'pg';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';
import type { ExternalProvider } from './oauth-state.rules.ts';

type Conn = Kysely<DB> | Tx;

const profileColumns = ['id', 'email', 'name', 'plan', 'credits', 'two_factor_enabled', 'referral_code'] as const;

export const accountsRepo = {
  findUserForLogin(db: Conn, email: string) {
    return db
      .selectFrom('users')
      .select(['id', 'name', 'email', 'password_hash'])
      .where(sql<string>`lower(email)`, '=', email.toLowerCase())
      .executeTakeFirst();
  },

  findUserByReferralCode(db: Conn, code: string) {
    return db.selectFrom('users').select(['id']).where('referral_code', '=', code.toUpperCase()).executeTakeFirst();
  },

  insertUser(
    db: Conn,
    user: {
      email: string;
      name: string;
      passwordHash: string | null;
      referralCode: string;
      referredBy?: string | null;
      walletAddress?: string | null;
      credits?: number;
      plan?: 'solo' | 'collective' | 'label' | 'network' | undefined;
    },
  ) {
    return db
      .insertInto('users')
      .values({
        email: user.email,
        name: user.name,
        password_hash: user.passwordHash,
        referral_code: user.referralCode,
        referred_by: user.referredBy ?? null,
        wallet_address: user.walletAddress ?? null,
        credits: user.credits ?? 0,
        ...(user.plan ? { plan: user.plan } : {}),
      })
      .returning(['id', 'email', 'name'])
      .executeTakeFirstOrThrow();
  },

  addCredits(db: Conn, userId: string, amount: number) {
    return db
      .updateTable('users')
      .set((eb) => ({ credits: eb('credits', '+', amount), updated_at: sql`now()` }))
      .where('id', '=', userId)
      .execute();
  },

  findUserByWalletOrEmail(db: Conn, walletAddress: string, email: string) {
    return db
      .selectFrom('users')
      .select(['id', 'name', 'email', 'wallet_address'])
      .where((eb) => eb.or([eb('wallet_address', '=', walletAddress), eb(sql<string>`lower(email)`, '=', email)]))
      .orderBy(sql`wallet_address is null`) // a wallet match beats an email match
      .executeTakeFirst();
  },

  linkWallet(db: Conn, userId: string, walletAddress: string) {
    return db
      .updateTable('users')
      .set({ wallet_address: walletAddress, updated_at: sql`now()` })
      .where('id', '=', userId)
      .where('wallet_address', 'is', null)
      .execute();
  },

  getProfile(trx: Tx, userId: string) {
    return trx.selectFrom('users').select(profileColumns).where('id', '=', userId).executeTakeFirst();
  },

  updateProfile(trx: Tx, userId: string, patch: { name?: string }) {
    return trx
      .updateTable('users')
      .set({ ...patch, updated_at: sql`now()` })
      .where('id', '=', userId)
      .returning(profileColumns)
      .executeTakeFirst();
  },

  insertSession(db: Conn, s: { userId: string; tokenHash: Buffer; expiresAt: Date; userAgent: string | null; ip: string | null }) {
    return db
      .insertInto('sessions')
      .values({ user_id: s.userId, token_hash: s.tokenHash, expires_at: s.expiresAt, user_agent: s.userAgent, ip: s.ip })
      .execute();
  },

  /**
   * A session for a password sign-in, made only while `passwordHash` is still the user's: false
   * when it is not. The row lock (FOR SHARE) orders it with whatever clears or replaces the
   * password and ends the user's sessions in one transaction (the first provider proof of the
   * address, a reset): either this insert waits for that commit and then finds the hash gone, or
   * that transaction waits for this insert and then deletes the new session too. Without it, a
   * sign-in whose password check was under way when the password was cleared would open a session
   * that outlives the clearing.
   */
  async insertSessionIfPassword(
    db: Conn,
    s: { userId: string; tokenHash: Buffer; expiresAt: Date; userAgent: string | null; ip: string | null },
    passwordHash: string,
  ): Promise<boolean> {
    const r = await db
      .insertInto('sessions')
      .columns(['user_id', 'token_hash', 'expires_at', 'user_agent', 'ip'])
      .expression((eb) =>
        eb
          .selectFrom('users')
          .select([
            'users.id',
            eb.val(s.tokenHash).as('token_hash'),
            eb.val(s.expiresAt).as('expires_at'),
            eb.val(s.userAgent).as('user_agent'),
            eb.val(s.ip).as('ip'),
          ])
          .where('users.id', '=', s.userId)
          .where('users.password_hash', '=', passwordHash)
          .forShare(),
      )
      .returning('id')
      .executeTakeFirst();
    return r !== undefined;
  },

  /**
   * The users of the live sessions among `tokenHashes` (with the hash each answers). This runs on
   * every authenticated request that misses the session cache, batched (accounts.service.ts), so
   * it is a named prepared statement: PostgreSQL parses and plans the join once per connection
   * instead of once per request (measured in bench/session.bench.ts).
   */
  async findSessionUsers(pool: Pool, tokenHashes: Buffer[]) {
    // the hash comes back as hex text and the expiry as epoch milliseconds: parsing a bytea and a
    // timestamptz per row costs more in Node than the rest of the row together
    const r = await pool.query<{
      hash: string;
      id: string;
      name: string;
      email: string;
      is_admin: boolean;
      email_verified: boolean;
      password_predates_verification: boolean;
      password_cleared_by: ExternalProvider | null;
      expires_ms: number;
    }>({
      name: 'accounts_find_session_users',
      // the notice is one index probe on account_notices' primary key, almost always finding nothing
      text: `SELECT encode(s.token_hash, 'hex') AS hash, u.id, u.name, u.email, u.is_admin, u.email_verified,
                    u.password_predates_verification,
                    (SELECT n.provider FROM account_notices n WHERE n.user_id = u.id AND n.kind = 'password-cleared') AS password_cleared_by,
                    (extract(epoch FROM s.expires_at) * 1000)::float8 AS expires_ms
               FROM sessions s JOIN users u ON u.id = s.user_id
              WHERE s.token_hash = ANY($1::bytea[]) AND s.expires_at > now()`,
      values: [tokenHashes],
    });
    return r.rows;
  },

  deleteSession(db: Conn, tokenHash: Buffer) {
    return db.deleteFrom('sessions').where('token_hash', '=', tokenHash).execute();
  },

  /** true when `ip` holds a live session of the user (a known client is exempt from the account-wide sign-in limit). */
  async hasLiveSessionFromIp(db: Conn, userId: string, ip: string): Promise<boolean> {
    const row = await db
      .selectFrom('sessions')
      .select('id')
      .where('user_id', '=', userId)
      .where('ip', '=', ip)
      .where('expires_at', '>', sql<Date>`now()`)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  },

  deleteSessionsOfUser(db: Conn, userId: string) {
    return db.deleteFrom('sessions').where('user_id', '=', userId).execute();
  },

  /** Records (or renews) the one-time `password-cleared` notice of a user (migration 215). */
  recordPasswordClearedNotice(db: Conn, userId: string, provider: ExternalProvider) {
    return db
      .insertInto('account_notices')
      .values({ user_id: userId, kind: 'password-cleared', provider })
      .onConflict((oc) => oc.columns(['user_id', 'kind']).doUpdateSet({ provider, created_at: sql`now()` }))
      .execute();
  },

  /** The signed-in user dismisses their notices (under row-level security). */
  deleteNotices(trx: Tx, userId: string) {
    return trx.deleteFrom('account_notices').where('user_id', '=', userId).execute();
  },

  /**
   * Records a SIWE nonce as spent (siwe-nonce.rules.ts: issuing is stateless, so this table holds only
   * spent nonces until they expire). false when it was spent before: single use decided by the
   * primary key, so two parallel sign-ins with one nonce cannot both pass.
   */
  async spendNonce(db: Conn, nonce: string, expiresAt: Date): Promise<boolean> {
    const row = await db
      .insertInto('siwe_nonces')
      .values({ nonce, expires_at: expiresAt })
      .onConflict((oc) => oc.column('nonce').doNothing())
      .returning('nonce')
      .executeTakeFirst();
    return row !== undefined;
  },

  /** Purge job: expired sessions can never authenticate again (the lookup checks expires_at); they are only dead weight. */
  deleteExpiredSessions(db: Conn) {
    return db.deleteFrom('sessions').where('expires_at', '<', sql<Date>`now()`).execute();
  },

  /** Purge job: spent nonces past their expiry can no longer be replayed (their signature check fails on expiry). */
  deleteExpiredNonces(db: Conn) {
    return db.deleteFrom('siwe_nonces').where('expires_at', '<', sql<Date>`now()`).execute();
  },
};
