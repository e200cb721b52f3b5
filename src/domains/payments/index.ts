/**
 * Money (docs/payments.md): the ledger, paid calls (§4.8), card top-ups and subscriptions, MPP and payment sessions.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export type { CardProcessor } from './card/card-processor.contract.ts';
export { createStripeProcessor } from './card/stripe-processor.client.ts';
export { createSubscriptionsService, type SubscriptionsService } from './card/subscriptions.service.ts';
export { createTopUpService, gatewayCheckout, type TopUpService } from './card/top-up.service.ts';
export { createLedgerService, type LedgerService } from './ledger/ledger.service.ts';
export { createMppMethod } from './mpp/mpp.service.ts';
export { createAgentChat } from './paid-calls/agent-chat.service.ts';
export { createAudioClient } from './paid-calls/audio.client.ts';
export {
  createPaidCallsService,
  type PaidCallAccount,
  type PaidCallCheckout,
  type PaidCallsService,
} from './paid-calls/paid-calls.service.ts';
export { createPlugins } from './paid-calls/plugins.service.ts';
export { createReceiptSigner, deriveReceiptKey } from './sessions/receipts.rules.ts';
export { createPaymentSessionsService, type PaymentSessionsService } from './sessions/sessions.service.ts';
