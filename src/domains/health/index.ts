/**
 * The apps' health (§4.12).
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { createHealthService, createPlatformMetrics, type HealthService, type SystemMetrics } from './health.service.ts';
