/**
 * Subscriptions (§2 Plans, docs/payments.md "Subscriptions"): a signed-in user starts a monthly
 * checkout for a plan; the processor's subscription webhooks set the plan and status. The
 * webhook needs the raw body for its signature: its plugin (the public scope) keeps the bytes.
 */

import { z } from 'zod';
import type { SubscriptionsService } from '../../../domains/payments/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

export const billingRoutes = (deps: { subscriptions: SubscriptionsService }): RouteModule<'public' | 'session'> => ({
  prefix: '/api',
  session: async (app) => {
    app.post('/billing/checkout', {
      schema: {
        tags: ['billing'],
        summary: 'Start a subscription checkout for a plan',
        description:
          'Plans and monthly prices of §2: solo 29, collective 69, label 149, network 499 GBP. Returns the processor checkout `url`; ' +
          'after payment the processor redirects to `/dashboard?subscription=success` and its webhook activates the plan. ' +
          '500 when no card processor is configured (then every account has DEFAULT_PLAN and needs no subscription).',
        body: z.object({ plan: z.string().max(32) }),
        response: { 200: z.object({ url: z.string(), sessionId: z.string() }), ...errorResponses(400, 401, 500) },
      },
      handler: async (request) => {
        return deps.subscriptions.startCheckout(currentUser(request), request.body.plan);
      },
    });
  },
  public: async (scope) => {
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    scope.post('/webhooks/stripe', {
      schema: {
        tags: ['billing'],
        summary: "The card processor's subscription webhook",
        description:
          'Signed with `Stripe-Signature` over the raw body (STRIPE_WEBHOOK_SECRET). Handles checkout.session.completed (subscription checkouts), ' +
          "customer.subscription.created/updated/deleted and invoice.payment_failed: they set the user's plan and subscription status. " +
          'Each event applies once; an event older than the last applied one changes nothing. Other events: 200 with `ignored`. Bad signature: 400.',
        security: [],
        headers: z.object({ 'stripe-signature': z.string().max(2000).optional() }),
        response: {
          200: z.object({ received: z.literal(true), applied: z.boolean(), ignored: z.string().optional() }),
          ...errorResponses(400, 500),
        },
      },
      handler: async (request) => {
        const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const sig = request.headers['stripe-signature'];
        return deps.subscriptions.handleWebhook(raw, Array.isArray(sig) ? sig[0] : sig);
      },
    });
  },
});
