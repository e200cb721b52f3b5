/** Kysely types of the hosting status table (migration 005). */
import type { Timestamp } from '../../db/schema.ts';

declare module '../../db/schema.ts' {
  interface DB {
    hosting_status: HostingStatusTable;
  }
}

/** One row (id = true): the latest record of the hosting status webhook (§6). */
export interface HostingStatusTable {
  id: boolean;
  status: string;
  name: string;
  message: string | null;
  event_type: string;
  received_at: Timestamp;
}
