/**
 * §4.4 card top-ups: GET /api/wallet/top-up starts a checkout; POST /api/wallet/top-up is the
 * processor's webhook (§6), verified over the raw body, so it lives in its own scope whose JSON
 * parser keeps the bytes (any re-serialisation would break the signature).
 */
import { z } from 'zod';
import type { TopUpService } from '../../../domains/payments/index.ts';
import type { App } from '../../shared/base-app.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';

export const topUpRoutes = (deps: { topUp: TopUpService }): RouteModule<'public'> => ({
  prefix: '/api/wallet/top-up',
  public: async (app) => {
    app.get('', {
      schema: {
        tags: ['wallet'],
        summary: 'Start a card checkout that tops up a wallet',
        description:
          '`amount` in cents: 500, 1000, 2500 or 5000 (5, 10, 25, 50 agent calls; default 1000). `address`: the wallet to credit, 0x + 40 hex. ' +
          'Returns the checkout `url` and `sessionId`; after payment the processor redirects to `/dashboard/wallet?top_up=success` ' +
          '(cancel: `?top_up=cancelled`) and its completed-checkout webhook credits the wallet. 500 when no card processor is configured.',
        security: [],
        querystring: z.object({ amount: z.string().max(12).optional(), address: z.string().max(100).optional() }),
        response: { 200: z.object({ url: z.string(), sessionId: z.string() }), ...errorResponses(400, 500) },
      },
      handler: async (request) => deps.topUp.startCheckout(request.query),
    });

    await app.register(async (scope: App) => {
      scope.removeContentTypeParser('application/json');
      scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
      scope.post('', {
        schema: {
          tags: ['wallet'],
          summary: "The card processor's webhook for wallet top-ups",
          description:
            "Header `payment-signature` carries the processor's signature (Stripe-Signature format) over the raw body. " +
            'A `checkout.session.completed` event with metadata `type: wallet_top_up` credits `amountCents` to `walletAddress` once per event id ' +
            '(replays answer `credited: false`). Other events: 200 with `ignored`. Missing or bad signature: 400.',
          security: [],
          headers: z.object({ 'payment-signature': z.string().max(2000).optional(), 'stripe-signature': z.string().max(2000).optional() }),
          response: {
            200: z.union([
              z.object({ received: z.literal(true), credited: z.boolean(), walletAddress: z.string(), amountCents: z.number() }),
              z.object({ received: z.literal(true), ignored: z.string() }),
            ]),
            ...errorResponses(400, 500),
          },
        },
        handler: async (request) => {
          const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
          // §4.4 names `payment-signature`; Stripe itself sends `Stripe-Signature`: accept either
          const sig = request.headers['payment-signature'] ?? request.headers['stripe-signature'];
          return deps.topUp.handleWebhook(raw, Array.isArray(sig) ? sig[0] : sig);
        },
      });
    });
  },
});
