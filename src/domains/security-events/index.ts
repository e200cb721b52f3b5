/**
 * Security events from the identity provider (§6, RISC).
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */

export { type ClaimedSecurityEvent, createSecurityEventsService, EVENTS_SUPPORTED, type SecurityEventsService } from './risc.service.ts';
export { createRiscVerifier, riscConfigUrl } from './risc-verifier.client.ts';
