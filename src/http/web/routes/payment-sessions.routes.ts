/**
 * Payment sessions (§4.18 POST /api/wallet/sessions; shape designed here, see docs/payments.md):
 * open one (signed in, or with the wallet's signature), read it and its receipts, close it, and
 * the key that signs its receipts. Thin: validation, one service call, response.
 */
import { z } from 'zod';
import type { PaymentSessionsService } from '../../../domains/payments/index.ts';
import { badRequest, notFound } from '../../../lib/errors.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders, errorResponses, headerText, jsonBody } from '../../shared/schemas.ts';
import type { SessionRouteConfig } from '../../shared/session.ts';

const sessionView = z.object({
  address: z.string(),
  status: z.enum(['active', 'closed', 'expired']),
  deposit: z.string().describe('USD'),
  remaining: z.string().describe('USD'),
  debits: z.number(),
  expiresAt: z.string(),
  createdAt: z.string(),
  endedAt: z.string().nullable(),
});

const SESSION_HEADER = 'x-session-id';

export const paymentSessionsRoutes = (deps: { sessions: PaymentSessionsService }): RouteModule<'session' | 'public'> => {
  const { sessions } = deps;

  const bySessionHeader = { headers: documentedHeaders({ [SESSION_HEADER]: 'the payment session id' }) };
  /** What `read` finds of the session X-Session-Id names: 400 without the header, 404 when there is no such session. */
  const ofNamedSession = async <T>(request: Parameters<typeof headerText>[0], read: (id: string) => Promise<T | undefined>): Promise<T> => {
    const id = headerText(request, SESSION_HEADER);
    if (!id) throw badRequest('X-Session-Id required');
    const found = await read(id);
    if (!found) throw notFound('Session not found');
    return found;
  };

  return {
    prefix: '/api',
    session: async (app) => {
      app.post('/wallet/sessions', {
        schema: {
          tags: ['payments'],
          summary: 'Open a payment session',
          description:
            "Moves `deposit` (USD, up to 6 decimals) from the wallet's card-funded ledger balance (top-ups, §4.4) into a new session. " +
            "Proof of the address: the signed-in user's own wallet (SIWE sign-in address or session wallet), or an EIP-712 `OpenSession` " +
            'signature by the address (`signature`, `deadline` in epoch seconds at most one hour ahead, `salt` 32 bytes, `sessionKeyHash`; single use). ' +
            'The domain is this deployment\'s (GET /api/payments/receipt-signer: `{name: "agent-platform payments", version: "2", chainId, verifyingContract}` ' +
            'with the receipt signer as verifyingContract), so a signature for another deployment is refused (403); types ' +
            '`OpenSession {wallet address, deposit uint256 (micro-USD), deadline uint256, salt bytes32, sessionKeyHash bytes32}` (docs/payments.md). ' +
            'With a signature the wallet chooses the session id itself (`ps_` + 43 base64url characters of 32 random bytes), keeps it secret and sends only ' +
            '`sessionKeyHash` = SHA-256 of its UTF-8 bytes: the 201 then has no `sessionId`, so whoever submits the signature cannot use the session. ' +
            'Signed in without a signature: 201 with `sessionId`, a bearer secret shown once (only its hash is stored). Send the id as ' +
            '`X-Session-Id` with `X-Wallet-Address` and `X-Payment-Method: session` to the gateway. Errors: 400 invalid address/deposit/signature/sessionKeyHash ' +
            'or signature already used, 401 neither signed in nor signed, 403 not your address or not a signature by it for this deployment, ' +
            '402 `insufficient_balance` with `balance` and `deposit`.',
          body: jsonBody({
            address: z.unknown().describe('0x + 40 hex'),
            deposit: z.unknown().describe('USD amount, number or decimal string, e.g. "0.10"'),
            signature: z.unknown().optional(),
            deadline: z.unknown().optional(),
            salt: z.unknown().optional(),
            sessionKeyHash: z.unknown().optional().describe('with `signature`: 0x + SHA-256 (hex) of the session id the wallet chose'),
          }),
          // documented as public, as before: the signature is the credential of a caller without a session
          security: [],
          response: {
            201: sessionView.extend({
              sessionId: z.string().optional().describe('signed-in opens only: the bearer id, shown once'),
            }),
            ...errorResponses(400, 401, 402, 403),
          },
        },
        // a signed-in caller opens for its own wallet; anyone may open with a signature (sessionOptional)
        config: { sessionOptional: true } satisfies SessionRouteConfig,
        handler: async (request, reply) => {
          const view = await sessions.open({ ...request.body, userId: request.user?.id ?? null });
          return reply.code(201).send(view);
        },
      });
    },
    public: async (app) => {
      app.get('/wallet/sessions', {
        schema: {
          tags: ['payments'],
          summary: 'Read a payment session',
          description: 'The session named by the `X-Session-Id` header (the id is the bearer secret). 400 without the header, 404 unknown.',
          ...bySessionHeader,
          response: { 200: sessionView, ...errorResponses(400, 404) },
        },
        handler: (request) => ofNamedSession(request, (id) => sessions.get(id)),
      });

      app.get('/wallet/sessions/receipts', {
        schema: {
          tags: ['payments'],
          summary: 'Receipts of a payment session',
          description:
            "The latest 1000 debits of the session named by `X-Session-Id`, oldest first: receipt `session:<id>:<nonce>`, amount, remainder after it and the platform's EIP-712 signature.",
          ...bySessionHeader,
          response: {
            200: z.object({
              receipts: z.array(
                z.object({
                  receipt: z.string(),
                  nonce: z.string(),
                  plugin: z.string(),
                  amount: z.string(),
                  remaining: z.string(),
                  signature: z.string(),
                  createdAt: z.string(),
                }),
              ),
            }),
            ...errorResponses(400, 404),
          },
        },
        handler: async (request) => ({ receipts: await ofNamedSession(request, (id) => sessions.receipts(id)) }),
      });

      app.delete('/wallet/sessions', {
        schema: {
          tags: ['payments'],
          summary: 'Close a payment session',
          description:
            "Closes the session named by `X-Session-Id`; its remainder returns to the wallet's balance (`returned`, USD). Closing twice returns nothing more.",
          ...bySessionHeader,
          response: { 200: sessionView.extend({ returned: z.string() }), ...errorResponses(400, 404) },
        },
        handler: (request) => ofNamedSession(request, (id) => sessions.close(id)),
      });

      app.get('/payments/receipt-signer', {
        schema: {
          tags: ['payments'],
          summary: 'The key that signs session receipts',
          description:
            "Address and EIP-712 domain of the platform's receipt key, so a client can verify `Payment-Receipt-Signature` offline and sign " +
            "`OpenSession` for this deployment (docs/payments.md). The domain's `verifyingContract` is the receipt key's address.",
          response: {
            200: z.object({
              address: z.string(),
              domain: z.object({ name: z.string(), version: z.string(), chainId: z.number(), verifyingContract: z.string() }),
            }),
          },
        },
        handler: async () => sessions.signerInfo(),
      });
    },
  };
};
