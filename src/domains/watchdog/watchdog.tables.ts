/** Kysely types of migration 050 (watchdog state, history and notification outbox). */
import type { ColumnType, Generated } from 'kysely';
import type { Timestamp } from '../../db/schema.ts';

declare module '../../db/schema.ts' {
  interface DB {
    agent_watchdog: AgentWatchdogTable;
    agent_watchdog_events: AgentWatchdogEventsTable;
    watchdog_notifications: WatchdogNotificationsTable;
  }
}

/** §3 "Watchdog lifecycle" states. */
export type WatchdogState = 'starting' | 'running' | 'degraded' | 'repairing' | 'crash_loop' | 'stopped';
export const WATCHDOG_STATES: readonly WatchdogState[] = ['starting', 'running', 'degraded', 'repairing', 'crash_loop', 'stopped'];

export type WatchdogEventKind = 'transition' | 'crash' | 'repair';

export interface AgentWatchdogTable {
  agent_id: string;
  user_id: string;
  state: Generated<WatchdogState>;
  failures: Generated<number>;
  repair_attempts: Generated<number>;
  next_check_at: Generated<Date>;
  last_check_at: Timestamp | null;
  last_healthy_at: Timestamp | null;
  last_error: string | null;
  state_changed_at: Generated<Date>;
  locked_by: string | null;
  lease_until: Timestamp | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface AgentWatchdogEventsTable {
  id: Generated<number>;
  agent_id: string;
  user_id: string;
  kind: WatchdogEventKind;
  from_state: string | null;
  to_state: string | null;
  attempt: number | null;
  ok: boolean | null;
  detail: string | null;
  holder: string | null;
  created_at: Generated<Date>;
}

type Json = ColumnType<Record<string, unknown>, string, string>;

export interface WatchdogNotificationsTable {
  id: Generated<number>;
  event_id: number;
  channel: 'telegram' | 'webhook';
  status: Generated<'pending' | 'sent' | 'failed'>;
  attempts: Generated<number>;
  next_attempt_at: Generated<Date>;
  last_error: string | null;
  payload: Json;
  created_at: Generated<Date>;
  sent_at: Timestamp | null;
}
