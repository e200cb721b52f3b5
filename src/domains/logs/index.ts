/**
 * Agents' live logs (§4.7).
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { createLiveLogs, type LiveLogs } from './live-logs.service.ts';
export { logLine } from './logs.schemas.ts';
