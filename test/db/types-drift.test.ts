/**
 * src/db/types.gen.ts is what kysely-codegen makes of the migrated schema (scripts/db-types.ts):
 * a migration that adds or changes a column without `npm run db:types` fails here.
 */
import { expect, it } from 'vitest';
import { runCodegen } from '../../scripts/db-types.ts';
import { createTestDatabase } from '../helpers/db.ts';

it('the generated row types match the migrations (run npm run db:types when this fails)', async () => {
  const database = await createTestDatabase();
  try {
    const r = runCodegen(database.url, true);
    expect(r.output).not.toMatch(/not up-to-date/);
    expect(r.ok).toBe(true);
  } finally {
    await database.drop();
  }
}, 60_000);
