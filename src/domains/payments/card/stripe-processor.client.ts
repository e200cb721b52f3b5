/**
 * The card processor on the `stripe` SDK. STRIPE_API_URL points it at Stripe or at a local fake
 * (tests); webhook signatures are verified by the SDK (`webhooks.constructEvent`: HMAC-SHA256
 * over `timestamp.payload`, compared in constant time, 300 s tolerance).
 */
import { createRequire } from 'node:module';
import type Stripe from 'stripe';
import type { CardProcessor, CheckoutInput, SubscriptionCheckoutInput } from './card-processor.contract.ts';

const requireCjs = createRequire(import.meta.url);

export function createStripeProcessor(options: {
  secretKey: string;
  webhookSecret: string | undefined;
  apiUrl: string;
  timeoutMs: number;
}): CardProcessor {
  const api = new URL(options.apiUrl);
  // the SDK is loaded at the first call (about 30 MB resident): an instance that never takes a
  // card payment never pays for it (docs/benchmarks.md "memory")
  let client: Stripe | undefined;
  const sdk = (): Stripe => {
    if (client) return client;
    const mod = requireCjs('stripe') as { default?: typeof Stripe } & typeof Stripe;
    const StripeSdk = (mod.default ?? mod) as typeof Stripe;
    client = new StripeSdk(options.secretKey, {
      host: api.hostname,
      port: Number(api.port || (api.protocol === 'http:' ? 80 : 443)),
      protocol: api.protocol === 'http:' ? 'http' : 'https',
      maxNetworkRetries: 0, // a failed checkout answers at once; the user can try again
      timeout: options.timeoutMs,
    });
    return client;
  };
  /** A hosted checkout page for one line item, back to the caller's URLs, `metadata` on the session. */
  const checkout = async (
    input: Pick<CheckoutInput, 'successUrl' | 'cancelUrl' | 'metadata'>,
    params: Omit<Stripe.Checkout.SessionCreateParams, 'success_url' | 'cancel_url' | 'metadata'>,
  ) => {
    const session = await sdk().checkout.sessions.create({
      ...params,
      success_url: input.successUrl,
      cancel_url: input.cancelUrl,
      metadata: input.metadata,
    });
    if (!session.url) throw new Error('checkout session without a url');
    return { id: session.id, url: session.url };
  };
  return {
    createCheckout: (input: CheckoutInput) =>
      checkout(input, {
        mode: 'payment',
        line_items: [
          { quantity: 1, price_data: { currency: 'usd', unit_amount: input.amountCents, product_data: { name: input.description } } },
        ],
        payment_intent_data: { metadata: input.metadata },
      }),
    createSubscriptionCheckout: (input: SubscriptionCheckoutInput) =>
      checkout(input, {
        mode: 'subscription',
        customer_email: input.customerEmail,
        line_items: [
          {
            quantity: 1,
            price_data: {
              currency: input.currency,
              unit_amount: input.amount,
              recurring: { interval: 'month' },
              product_data: { name: input.description },
            },
          },
        ],
        subscription_data: { metadata: input.metadata },
      }),
    verifyWebhook(rawBody, signature) {
      if (!options.webhookSecret) return { ok: false, reason: 'STRIPE_WEBHOOK_SECRET is not set' };
      try {
        const event = sdk().webhooks.constructEvent(rawBody, signature, options.webhookSecret);
        return { ok: true, event: { id: event.id, type: event.type, created: event.created, object: event.data.object as never } };
      } catch (err) {
        return { ok: false, reason: (err as Error).message };
      }
    },
  };
}
