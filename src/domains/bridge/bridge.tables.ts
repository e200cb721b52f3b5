/** Kysely types of migration 004's bridge tables (§2 Bridge message, §4.13). */
import type { ColumnType, Generated } from 'kysely';

declare module '../../db/schema.ts' {
  interface DB {
    bridge_messages: BridgeMessagesTable;
    bridge_reads: BridgeReadsTable;
  }
}

export interface BridgeMessagesTable {
  id: Generated<string>;
  seq: ColumnType<number, never, never>;
  sender: string;
  channel: Generated<string>;
  content: string;
  priority: Generated<string>;
  created_at: Generated<Date>;
}

export interface BridgeReadsTable {
  message_id: string;
  reader: string;
  read_at: Generated<Date>;
}
