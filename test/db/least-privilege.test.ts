/**
 * The README's least-privilege setup ("Use an existing PostgreSQL"), followed literally: an
 * administrator creates `platform_app` and grants it to the platform's owner role, which has no
 * CREATEROLE and is no superuser. Migrations must then run as that owner (they failed at
 * `001_foundation: permission denied to create role`), and request queries still run under
 * row-level security. Runs on the suite's server (embedded, or TEST_DATABASE_URL).
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createDb } from '../../src/db/client.ts';
import { migrate } from '../../src/db/migrate.ts';
import { withDatabase } from '../global-setup.ts';

const adminUrl = inject('dbAdminUrl');
const suffix = randomBytes(4).toString('hex');
const owner = `lp_owner_${suffix}`;
const database = `lp_db_${suffix}`;
const password = `pw-${suffix}`;

async function asAdmin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

afterAll(async () => {
  await asAdmin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    await c.query(`DROP ROLE IF EXISTS "${owner}"`);
  });
});

describe('README least-privilege database setup', () => {
  it('migrates as an owner without CREATEROLE once an administrator created platform_app, and requests run under RLS', async () => {
    await asAdmin(async (c) => {
      await c.query(`CREATE ROLE "${owner}" LOGIN PASSWORD '${password}' NOSUPERUSER NOCREATEROLE NOCREATEDB NOBYPASSRLS`);
      await c.query(`CREATE DATABASE "${database}" OWNER "${owner}"`);
      // the administrator's one-time step from the README (roles are cluster-wide: it may exist)
      await c.query(`DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'platform_app') THEN CREATE ROLE platform_app NOLOGIN NOBYPASSRLS; END IF; END $$`);
      await c.query(`GRANT platform_app TO "${owner}"`);
    });
    const u = new URL(withDatabase(adminUrl, database));
    u.username = owner;
    u.password = password;
    const { applied } = await migrate(u.toString());
    expect(applied.length).toBeGreaterThan(5);

    const db = createDb(u.toString(), { poolSize: 2 });
    try {
      const user = await db.kysely
        .insertInto('users')
        .values({ email: `lp-${suffix}@example.com`, name: 'lp', password_hash: null, referral_code: `LP${suffix}`.toUpperCase() })
        .returning('id')
        .executeTakeFirstOrThrow();
      await db.withUser(user.id, async (trx) => {
        const rows = await trx.selectFrom('users').select('id').execute();
        expect(rows.map((r) => r.id)).toEqual([user.id]);
      });
      const role = await db.withUser(user.id, (trx) => sql<{ r: string }>`select current_user as r`.execute(trx));
      expect(role.rows[0]!.r).toBe('platform_app');
    } finally {
      await db.close();
    }
  }, 60_000);
});
