/**
 * x402 payments and the colony (docs/payments.md "x402").
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */

export { createHttpX402Gateway, X402_COLONY_JOIN_TIMEOUT_MS, X402_HEALTH_TIMEOUT_MS, type X402Gateway } from './x402.client.ts';
export { createX402Service, X402_ACTIONS, X402_ERRORS, X402_MAX_AMOUNT, type X402Service, x402Action } from './x402.service.ts';
export { createX402Charges } from './x402-charge.service.ts';
export { createX402Payer } from './x402-payer.client.ts';
