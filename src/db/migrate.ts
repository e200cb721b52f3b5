/**
 * Forward-only SQL migrations from src/db/migrations (NNN_name.sql), each in its own
 * transaction, all under a session advisory lock so two replicas starting together never both
 * migrate: the second waits, then finds nothing left to do.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { APP_ROLE } from './client.ts';

/** The columns of `users` request code (inside withUser) may update: the profile (§4.1). */
export const USERS_APP_UPDATABLE = ['name', 'updated_at'] as const;

export const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
/** Arbitrary constant identifying "schema migration" among advisory locks. */
const MIGRATION_LOCK_KEY = 727_274_001;

export type MigrationResult = { applied: string[] };

export function listMigrations(dir = MIGRATIONS_DIR): { id: string; sql: string }[] {
  return readdirSync(dir)
    .filter((f) => /^\d{3}_[\w-]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ id: f.replace(/\.sql$/, ''), sql: readFileSync(join(dir, f), 'utf8') }));
}

/** Tables only the ledger (owner connection) touches. */
const MONEY_TABLES = ['ledger_entries', 'wallet_balances', 'payment_sessions', 'mpp_payments', 'billing_events', 'spend_holds'];
/** Audit tables the request role may add its own rows to and read, never change (migration 180). */
const APPEND_ONLY_TABLES = ['x402_payments_audit'];

export async function migrate(connectionString: string, dir = MIGRATIONS_DIR): Promise<MigrationResult> {
  const client = new pg.Client({ connectionString, application_name: 'agent-platform-migrate' });
  client.on('error', () => {}); // the server going away fails the running query instead of crashing the process
  await client.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await client.query<{ id: string }>('SELECT id FROM schema_migrations')).rows.map((r) => r.id));
    for (const m of listMigrations(dir)) {
      if (done.has(m.id)) continue;
      try {
        await client.query('BEGIN');
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (id) VALUES ($1)', [m.id]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${m.id} failed: ${(err as Error).message}`, { cause: err });
      }
      applied.push(m.id);
    }
    // Idempotent: the request role may use every table; row-level security decides which rows,
    // and on `users` it may change only what a signed-in user changes about themselves (plan,
    // admin right, credits, subscription and wallet are changed by system code as the owner).
    // The money tables are the ledger's alone (it runs on the owner connection): no right at all
    // for the request role (migration 070 adds RLS and a trigger too). Append-only tables (audits)
    // take rows and never change them. A database migrated only part of the way (tests that stop
    // before a migration) lacks the later tables: only the ones that exist are named.
    const existing = new Set(
      (await client.query<{ tablename: string }>(`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)).rows.map(
        (r) => r.tablename,
      ),
    );
    const money = MONEY_TABLES.filter((t) => existing.has(t));
    const appendOnly = APPEND_ONLY_TABLES.filter((t) => existing.has(t));
    await client.query(`GRANT USAGE ON SCHEMA public TO ${APP_ROLE};
      GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${APP_ROLE};
      GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ${APP_ROLE};
      REVOKE ALL ON schema_migrations FROM ${APP_ROLE};
      ${money.length ? `REVOKE ALL ON ${money.join(', ')} FROM ${APP_ROLE};` : ''}
      ${appendOnly.length ? `REVOKE UPDATE, DELETE, TRUNCATE ON ${appendOnly.join(', ')} FROM ${APP_ROLE};` : ''}
      REVOKE UPDATE ON users FROM ${APP_ROLE};
      GRANT UPDATE (${USERS_APP_UPDATABLE.join(', ')}) ON users TO ${APP_ROLE};`);
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {});
    await client.end();
  }
  return { applied };
}
