/**
 * A connection the server ends (PostgreSQL shutting down or restarting: 57P01) while the platform
 * holds it between two queries of a transaction must not crash the process with `Unhandled
 * 'error' event` (src/db/client.ts): the transaction fails like any failed query, and the pool
 * serves the next request on a new connection.
 */
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t?.drop());

it('a connection terminated by the server inside a transaction fails that transaction, not the process', async () => {
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  try {
    const admin = new pg.Client({ connectionString: t.url });
    await admin.connect();
    const tx = t.db.kysely.transaction().execute(async (trx) => {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
      // the server ends this connection while the transaction waits on something else
      await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      await new Promise((r) => setTimeout(r, 200));
      await sql`select 1`.execute(trx);
    });
    await expect(tx).rejects.toThrow();
    await admin.end();
    expect(uncaught).toEqual([]);
    expect((await sql<{ one: number }>`select 1 as one`.execute(t.db.kysely)).rows[0]!.one).toBe(1);
  } finally {
    process.off('uncaughtException', onUncaught);
  }
});
