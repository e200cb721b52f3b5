/** Domain names for watchdog columns, derived from the generated row types (src/db/types.gen.ts). */
import type { Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';

export type WatchdogState = Selectable<DB['agent_watchdog']>['state'];
export type WatchdogEventKind = Selectable<DB['agent_watchdog_events']>['kind'];
/** §3 watchdog lifecycle, in order; `satisfies` makes each one a value the column allows */
export const WATCHDOG_STATES = [
  'starting',
  'running',
  'degraded',
  'repairing',
  'crash_loop',
  'stopped',
] as const satisfies readonly WatchdogState[];
