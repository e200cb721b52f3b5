/** Kysely types of the API key table (migration 003), added to DB by module augmentation. */
import type { ColumnType, Generated } from 'kysely';

declare module '../../db/schema.ts' {
  interface DB {
    api_keys: ApiKeysTable;
  }
}

export interface ApiKeysTable {
  id: Generated<string>;
  user_id: string;
  name: string;
  /** first 10 characters of the raw key: the lookup index and the owner's `keyPreview` */
  prefix: string;
  /** SHA-256 of the raw key; the raw key itself is never stored */
  key_hash: Buffer;
  created_at: Generated<Date>;
  last_used_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}
