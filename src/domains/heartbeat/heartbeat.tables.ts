/** Kysely types of migration 004's heartbeat table (§2 Heartbeat settings). */
import type { Generated } from 'kysely';
import type { Timestamp } from '../../db/schema.ts';

declare module '../../db/schema.ts' {
  interface DB {
    heartbeat_settings: HeartbeatSettingsTable;
  }
}

export interface HeartbeatSettingsTable {
  user_id: string;
  agent_id: string;
  frequency: Generated<string>;
  enabled: Generated<boolean>;
  last_heartbeat: Timestamp | null;
  next_heartbeat: Timestamp | null;
  last_updated: Generated<Date>;
  /** migration 051: the schedule's lease and the outcome of the last run */
  locked_by: string | null;
  lease_until: Timestamp | null;
  last_run_status: 'ok' | 'failed' | 'skipped' | null;
  last_run_error: string | null;
  runs: Generated<number>;
}
