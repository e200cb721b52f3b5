/**
 * §4.4 custodial wallets through the CDP provider: POST /api/wallet/create, GET|POST
 * /api/wallet/cdp (docs/payments.md "Custodial wallets").
 */
import { z } from 'zod';
import type { CdpWalletsService } from '../../../domains/wallet/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const providerError = errorSchema
  .extend({ setup: z.string().optional(), details: z.string().optional() })
  .describe("500: `CDP_NOT_CONFIGURED` with `setup` (what to configure), or `CDP_FAILED` with the provider's `details`");

export const cdpWalletRoutes = (deps: { wallets: CdpWalletsService }): RouteModule<'public' | 'session'> => {
  const { wallets } = deps;

  return {
    prefix: '/api/wallet',
    public: async (app) => {
      app.get('/cdp', {
        schema: {
          tags: ['wallet'],
          summary: 'What the custodial wallet provider supports (§4.4)',
          security: [],
          response: { 200: z.object({ status: z.literal('ok'), type: z.literal('evm_wallet'), supportedChains: z.array(z.string()) }) },
        },
        handler: async () => wallets.info(),
      });
    },
    session: async (app) => {
      app.post('/create', {
        schema: {
          tags: ['wallet'],
          summary: 'Creates a custodial wallet at the provider (§4.4)',
          description:
            'A new EVM account at the CDP provider, recorded for the signed-in user. 400 without `email`; 500 with `setup` when the provider is not configured, with `details` when it fails.',
          body: z.object({ email: z.string().max(320).optional() }),
          response: {
            200: z.object({ success: z.literal(true), walletAddress: z.string(), walletId: z.string(), networks: z.array(z.string()) }),
            500: providerError,
            ...errorResponses(400, 401),
          },
        },
        handler: async (request) => wallets.create(currentUser(request).id, request.body.email),
      });

      app.post('/cdp', {
        schema: {
          tags: ['wallet'],
          summary: 'Imports a private key into a custodial wallet, or generates one (§4.4)',
          description:
            'With `privateKey` (0x + 64 hex) the key is imported (sent to the provider encrypted with its RSA key, not stored here); without it ' +
            'the platform generates a key, imports it, and keeps a copy sealed with WALLET_ENCRYPTION_KEY. The provider must report the address ' +
            'the key derives. Session required (designed: the specification does not say). 400 bad key, 409 already registered, 500 as for create.',
          body: z.object({ privateKey: z.string().max(200).optional() }).optional(),
          response: {
            200: z.object({ success: z.literal(true), address: z.string(), network: z.literal('base-sepolia') }),
            500: providerError,
            ...errorResponses(400, 401, 409),
          },
        },
        handler: async (request) => wallets.createOrImport(currentUser(request).id, request.body?.privateKey),
      });
    },
  };
};
