/**
 * What this server offers (not in the specification; docs/dashboard.md "What the server offers"):
 * the integrations whose settings are set. The dashboard reads it once and does not offer what
 * cannot work (a card top-up without a card processor, balances without a chain RPC, a calendar
 * connection without its OAuth client). The routes of an integration that is not configured still answer,
 * with their documented "not configured" error (§7), logged as one warning line.
 */
import { z } from 'zod';
import type { Config } from '../../../config/env.ts';
import type { RouteModule } from '../../shared/routes.ts';

const features = z.object({
  cardPayments: z
    .boolean()
    .describe('STRIPE_SECRET_KEY is set: card top-ups (GET /api/wallet/top-up) and plan checkout (POST /api/billing/checkout)'),
  chainBalances: z.boolean().describe('TEMPO_RPC_URL is set: stablecoin balances by address (GET /api/wallet?address=)'),
  custodialWallets: z.boolean().describe('CDP_API_KEY_ID and CDP_API_KEY_SECRET are set: custodial wallets (POST /api/wallet/create)'),
  idp: z.boolean().describe('IDP_CLIENT_ID and IDP_CLIENT_SECRET are set: sign-in with the identity provider (GET /api/auth/idp)'),
  codehost: z
    .boolean()
    .describe('CODEHOST_CLIENT_ID and CODEHOST_CLIENT_SECRET are set: sign-in with the code host (GET /api/auth/codehost)'),
  calendar: z.boolean().describe('CALENDAR_CLIENT_ID and CALENDAR_CLIENT_SECRET are set: calendar connections (§4.6, /api/calendar)'),
  passwordReset: z
    .boolean()
    .describe(
      'SMTP_URL is set: a forgotten password can be reset by email (POST /api/auth/password-reset/request); otherwise the operator resets it',
    ),
  x402: z.boolean().describe('X402_GATEWAY_URL is set: the x402 gateway proxy (§4.11, GET and POST /api/x402)'),
  modelBilling: z
    .boolean()
    .describe('AI_BILLING=balance: model calls are paid from the balance (docs/payments.md "Model calls from the balance")'),
});

export type Features = z.infer<typeof features>;

export function featuresOf(
  config: Pick<Config, 'configured' | 'TEMPO_RPC_URL' | 'SMTP_URL' | 'X402_GATEWAY_URL' | 'AI_BILLING'>,
): Features {
  return {
    cardPayments: config.configured.stripe,
    chainBalances: config.TEMPO_RPC_URL !== undefined,
    custodialWallets: config.configured.cdp,
    idp: config.configured.idp,
    codehost: config.configured.codehost,
    calendar: config.configured.calendar,
    passwordReset: config.SMTP_URL !== undefined,
    x402: config.X402_GATEWAY_URL !== undefined,
    modelBilling: config.AI_BILLING === 'balance',
  };
}

export const featuresRoutes = (deps: { features: Features }): RouteModule<'public'> => ({
  prefix: '/api',
  public: async (app) => {
    app.get('/features', {
      schema: {
        tags: ['health'],
        summary: 'What this server offers',
        description:
          'No authentication. Which integrations are configured on this server, so a client offers only what can work. The routes of an ' +
          'integration that is off still answer with their "not configured" error: 500 `PROCESSOR_NOT_CONFIGURED` (card payments), ' +
          '500 `RPC_NOT_CONFIGURED` (balances), 500 `CDP_NOT_CONFIGURED` with `setup` (custodial wallets), 503 `x402 gateway not configured` ' +
          '(x402), each logged as one warning ' +
          'line without a stack trace.',
        response: { 200: features },
      },
      handler: async () => deps.features,
    });
  },
});
