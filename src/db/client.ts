/**
 * The database handle every repository receives. One `pg` pool, wrapped by Kysely.
 *
 * Two ways in:
 * - `db.kysely`: the owner connection, for system work that must see across users by design
 *   (session lookup by token hash, sign-in by email, migrations, workers). Keep it to
 *   repositories that document why.
 * - `db.withUser(userId, fn)`: a transaction that switches to the `platform_app` role (no
 *   BYPASSRLS, not the owner) and sets `app.user_id`, so row-level security limits every query in
 *   `fn` to that user's rows (§5 "database user context"). Both settings are transaction-local and
 *   vanish at COMMIT/ROLLBACK, so a pooled connection never leaks one user's context to the next.
 */
import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import type { DB } from './schema.ts';

export const APP_ROLE = 'platform_app';

export type Tx = Transaction<DB>;

export type Db = {
  kysely: Kysely<DB>;
  pool: pg.Pool;
  /** the request transactions' own pool, when `requestConnectionString` gave one (its usage is a metric, docs/metrics.md) */
  requestPool?: pg.Pool;
  /** Runs `fn` in a transaction as the RLS-bound role with `app.user_id` = userId. */
  withUser<T>(userId: string, fn: (trx: Tx) => Promise<T>): Promise<T>;
  /** Runs `fn` as the RLS-bound role with no user: per-user tables show no rows. */
  withoutUser<T>(fn: (trx: Tx) => Promise<T>): Promise<T>;
  close(): Promise<void>;
};

// int8 (e.g. count(*)) as a JS number: our counts stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));

export function createDb(
  connectionString: string,
  options: {
    poolSize?: number;
    applicationName?: string;
    /**
     * A login role that is only a member of platform_app (docs/security.md "Database roles"): when
     * given, request transactions use their own pool on it, so even a `RESET ROLE` smuggled into a
     * request's SQL leaves it without the owner's rights. Without it they use the owner's pool.
     */
    requestConnectionString?: string;
  } = {},
): Db {
  const newPool = (url: string, name: string) => {
    const p = new pg.Pool({ connectionString: url, max: options.poolSize ?? 10, application_name: name, idleTimeoutMillis: 30_000 });
    // A connection the server ends (restart, shutdown: 57P01) must not crash the process. The pool
    // drops an idle client that errors; a client checked out between two queries of a transaction
    // has no listener of the pool's, so each client gets its own: its next query then fails, and
    // that failure reaches the caller like any other.
    p.on('error', () => {});
    p.on('connect', (client) => client.on('error', () => {}));
    return p;
  };
  const pool = newPool(connectionString, options.applicationName ?? 'agent-platform');
  const kysely = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  const requestPool = options.requestConnectionString
    ? newPool(options.requestConnectionString, `${options.applicationName ?? 'agent-platform'}-request`)
    : undefined;
  const requestKysely = requestPool ? new Kysely<DB>({ dialect: new PostgresDialect({ pool: requestPool }) }) : kysely;

  const asApp = <T>(userId: string, fn: (trx: Tx) => Promise<T>) =>
    requestKysely.transaction().execute(async (trx) => {
      // one round trip for both settings; `role` via set_config is SET LOCAL ROLE
      await sql`select set_config('role', ${APP_ROLE}, true), set_config('app.user_id', ${userId}, true)`.execute(trx);
      return fn(trx);
    });

  return {
    kysely,
    pool,
    ...(requestPool ? { requestPool } : {}),
    withUser: (userId, fn) => asApp(userId, fn),
    withoutUser: (fn) => asApp('', fn),
    close: async () => {
      await Promise.all([kysely.destroy(), requestKysely === kysely ? undefined : requestKysely.destroy()]);
    },
  };
}
