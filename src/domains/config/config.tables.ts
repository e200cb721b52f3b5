/** Kysely types of the configuration tables (migration 003), added to DB by module augmentation. */
import type { ColumnType, Generated } from 'kysely';

declare module '../../db/schema.ts' {
  interface DB {
    agent_configs: AgentConfigsTable;
    config_backups: ConfigBackupsTable;
  }
}

/** A JSON object as stored in a jsonb column: written as its JSON text, read back parsed. */
export type JsonObject = Record<string, unknown>;
type Jsonb = ColumnType<JsonObject, string, string>;

export interface AgentConfigsTable {
  user_id: string;
  /** null until the first save (the default configuration applies) */
  config: ColumnType<JsonObject | null, string | null, string | null>;
  last_backup_ms: ColumnType<number, number | undefined, number>;
  updated_at: Generated<Date>;
}

export interface ConfigBackupsTable {
  user_id: string;
  id: string;
  seq: ColumnType<number, never, never>;
  config: Jsonb;
  created_at: ColumnType<Date, Date | string | undefined, never>;
}
