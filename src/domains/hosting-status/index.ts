/**
 * The hosting status record and its webhook (§4.12).
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { createHostingStatusService, type HostingStatusService } from './hosting-status.service.ts';
export { createUpstashStatusStore, type StatusStore } from './status-store.client.ts';
