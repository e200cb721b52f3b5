import type { paths } from '../../api/openapi.gen.ts';

/** An agent as GET /api/agents/:id returns it. */
export type Agent = paths['/api/agents/{id}']['get']['responses'][200]['content']['application/json']['agent'];

/** Watchdog states (§3) of an agent meant to run whose process does not (it crashed, hangs, or is being repaired). */
const NOT_RUNNING = new Set(['degraded', 'repairing', 'crash_loop']);

/**
 * The status to show for an agent: its record's (`running` means it is meant to run), except when
 * the watchdog has found its process not running; then the watchdog's state, so a crashed agent
 * never reads `running` (docs/watchdog.md "Checks on demand": within seconds of the exit).
 */
export function shownStatus(a: { status: string; watchdog?: { state: string } | null | undefined }): string {
  return a.status === 'running' && a.watchdog && NOT_RUNNING.has(a.watchdog.state) ? a.watchdog.state : a.status;
}
