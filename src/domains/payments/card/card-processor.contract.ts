/**
 * The card processor (§1 item 5, §4.4 top-up, §4.8 `stripe` method, §6 payment webhook) behind
 * one interface (docs/architecture.md rule 4): checkout creation and webhook verification. The real
 * implementation is stripe-processor.client.ts (the `stripe` SDK on STRIPE_API_URL); tests run it
 * against test/fakes/stripe-api.ts, a local server that speaks Stripe's REST shapes.
 */

export type CheckoutInput = {
  amountCents: number;
  /** the line item's name on the checkout page */
  description: string;
  successUrl: string;
  cancelUrl: string;
  metadata: Record<string, string>;
};

export type Checkout = { id: string; url: string };

export type SubscriptionCheckoutInput = {
  /** monthly price in the smallest unit of `currency` */
  amount: number;
  currency: string;
  description: string;
  customerEmail: string;
  successUrl: string;
  cancelUrl: string;
  /** kept on the checkout and on the subscription (its later events carry it too) */
  metadata: Record<string, string>;
};

/** A verified processor event, reduced to what the platform acts on. */
export type CardEvent = {
  id: string;
  type: string;
  /** when the processor created the event (epoch seconds): orders deliveries that arrive out of order */
  created: number;
  /** the event's object (e.g. a checkout session) */
  object: {
    id?: string;
    metadata?: Record<string, string> | null;
    payment_status?: string;
    amount_total?: number | null;
    [k: string]: unknown;
  };
};

export type WebhookVerdict = { ok: true; event: CardEvent } | { ok: false; reason: string };

export interface CardProcessor {
  /** A hosted checkout for a one-time card payment. */
  createCheckout(input: CheckoutInput): Promise<Checkout>;
  /** A hosted checkout that starts a monthly subscription. */
  createSubscriptionCheckout(input: SubscriptionCheckoutInput): Promise<Checkout>;
  /** Checks the signature header over the raw body; a bad one is an expected outcome (a value). */
  verifyWebhook(rawBody: Buffer, signature: string): WebhookVerdict;
}
