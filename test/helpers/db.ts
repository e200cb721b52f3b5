/** A fresh migrated database per test file, cloned from the run's template. */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createDb, type Db } from '../../src/db/client.ts';
import { withDatabase } from '../global-setup.ts';

export type TestDatabase = { url: string; db: Db; drop(): Promise<void> };

export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('dbAdminUrl');
  const template = inject('dbTemplate');
  const name = `t_${template}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  const db = createDb(url, { poolSize: 10 });
  return {
    url,
    db,
    async drop() {
      await db.close();
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => {});
      await a.end();
    },
  };
}
