/**
 * The database's row types. Generated from the migrated schema into ./types.gen.ts by
 * `npm run db:types` (scripts/db-types.ts, kysely-codegen); test/db/types-drift.test.ts fails
 * when a migration changes a table and the file was not regenerated. Columns narrower in code
 * than in SQL (CHECK lists, jsonb shapes) are declared once, in the script's OVERRIDES.
 */
import type { Selectable } from 'kysely';
import type { DB } from './types.gen.ts';

export type { DB } from './types.gen.ts';
export type AgentStatus = Selectable<DB['agents']>['status'];
