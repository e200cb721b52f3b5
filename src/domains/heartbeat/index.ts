/**
 * Agents' heartbeats (§4.12): settings and the schedule the worker runs.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */

export { createHeartbeatService, type HeartbeatRun, type HeartbeatService } from './heartbeat.service.ts';
export type { DueHeartbeat } from './heartbeat-schedule.repo.ts';
