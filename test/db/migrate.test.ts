/** Migrations: forward-only, and two replicas starting together never both migrate. */

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { listMigrations, migrate } from '../../src/db/migrate.ts';
import { withDatabase } from '../global-setup.ts';

const admin = inject('dbAdminUrl');
const created: string[] = [];

async function emptyDatabase(): Promise<string> {
  const name = `t_${inject('dbTemplate')}_m${randomBytes(3).toString('hex')}`;
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`CREATE DATABASE "${name}"`);
  await c.end();
  created.push(name);
  return withDatabase(admin, name);
}

afterAll(async () => {
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  for (const name of created) await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await c.end();
});

describe('migrate', () => {
  it('applies every migration once when three replicas start at the same moment', async () => {
    const url = await emptyDatabase();
    const results = await Promise.all([migrate(url), migrate(url), migrate(url)]);
    const all = listMigrations().map((m) => m.id);
    // exactly one replica applied them; the others waited on the advisory lock and found nothing to do
    expect(results.map((r) => r.applied.length).sort()).toEqual([0, 0, all.length]);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const rows = await c.query<{ id: string }>('SELECT id FROM schema_migrations ORDER BY id');
    await c.end();
    expect(rows.rows.map((r) => r.id)).toEqual(all);
  });

  it('is a no-op on an up-to-date database', async () => {
    const url = await emptyDatabase();
    await migrate(url);
    expect((await migrate(url)).applied).toEqual([]);
  });
});
