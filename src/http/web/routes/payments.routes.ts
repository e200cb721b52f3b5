/**
 * Payment sessions (§4.18 POST /api/wallet/sessions; shape designed here, see docs/payments.md)
 * and the v1 gateway (§4.8 POST /api/v1/gateway). Thin: validation, one service call, response.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { PaidCallAccount, PaidCallsService, PaymentSessionsService } from '../../../domains/payments/index.ts';
import { ERROR_CODES } from '../../../lib/error-codes.ts';
import { badRequest, notFound } from '../../../lib/errors.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders, errorSchema, jsonBody } from '../../shared/schemas.ts';
import type { AccountRouteConfig, SessionRouteConfig } from '../../shared/session.ts';
import { startEventStream } from '../../shared/sse.ts';

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
const headerOf = (request: FastifyRequest, name: string) => {
  const v = request.headers[name];
  return typeof v === 'string' ? v.trim() : undefined;
};

const gatewayResponse = z
  .object({
    plugin: z.string(),
    message: z
      .unknown()
      .describe("the plugin's answer: text for agent, generate-text and stt; `{audio (base64), contentType, format}` for tts"),
    timestamp: z.string(),
    payment: z.object({
      method: z.enum(['stripe', 'mpp', 'session']),
      receipt: z.string(),
      signature: z
        .string()
        .optional()
        .describe("session method: the platform's EIP-712 receipt signature (GET /api/payments/receipt-signer)"),
    }),
  })
  .loose();

export const paymentsRoutes = (deps: {
  sessions: PaymentSessionsService;
  gateway: PaidCallsService;
}): RouteModule<'session' | 'public' | 'account'> => {
  const { sessions, gateway } = deps;

  const bySessionHeader = { headers: documentedHeaders({ [SESSION_HEADER]: 'the payment session id' }) };

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
            400: errorSchema,
            401: errorSchema,
            402: errorSchema,
            403: errorSchema,
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
          response: { 200: sessionView, 400: errorSchema, 404: errorSchema },
        },
        handler: async (request) => {
          const id = headerOf(request, SESSION_HEADER);
          if (!id) throw badRequest('X-Session-Id required');
          const view = await sessions.get(id);
          if (!view) throw notFound('Session not found');
          return view;
        },
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
            400: errorSchema,
            404: errorSchema,
          },
        },
        handler: async (request) => {
          const id = headerOf(request, SESSION_HEADER);
          if (!id) throw badRequest('X-Session-Id required');
          const receipts = await sessions.receipts(id);
          if (!receipts) throw notFound('Session not found');
          return { receipts };
        },
      });

      app.delete('/wallet/sessions', {
        schema: {
          tags: ['payments'],
          summary: 'Close a payment session',
          description:
            "Closes the session named by `X-Session-Id`; its remainder returns to the wallet's balance (`returned`, USD). Closing twice returns nothing more.",
          ...bySessionHeader,
          response: { 200: sessionView.extend({ returned: z.string() }), 400: errorSchema, 404: errorSchema },
        },
        handler: async (request) => {
          const id = headerOf(request, SESSION_HEADER);
          if (!id) throw badRequest('X-Session-Id required');
          const view = await sessions.close(id);
          if (!view) throw notFound('Session not found');
          return view;
        },
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
    // a caller with an account pays from its balance; anyone else pays per call (402): the caller is optional
    account: async (app) => {
      app.post('/v1/gateway', {
        schema: {
          tags: ['gateway'],
          summary: 'Call a plugin, paid by card balance, MPP or a payment session',
          description:
            "Plugins and prices per call: `agent` $0.05 (the caller's running agent, else the AI layer; streams), `generate-text` $0.01 (AI layer; streams), " +
            '`tts` $0.03 and `stt` $0.02 (the OpenAI-compatible audio endpoints of OPENAI_BASE_URL). `X-Plugin-Id` overrides body `plugin` (default `agent`); ' +
            'other body fields go to the plugin (`messages` or `prompt`; tts `input`, `voice`, `format`; stt `audio` base64, `filename`). ' +
            'Method: X-Payment-Method (`stripe`, `mpp`, `session`), else `Authorization: Payment` means mpp, else `stripe`: a caller with an account ' +
            '(cookie, or `Authorization: Bearer sk_…`) pays from the ledger balance of their wallet (GET /api/wallet `balance`: card top-ups and ' +
            'admin credits, session wallet first); a short balance is 402 `payment_required` with `balance` and `cost` (decimal USD) besides the ' +
            'fields below, nothing debited; a caller without an account gets 402 `payment_required` with ' +
            '`mpp` and `stripe:{checkoutUrl, amount (cents), currency}` and `WWW-Authenticate: Payment …` (`checkoutUrl` is reused per plugin and ' +
            '`X-Wallet-Address` for 10 minutes, and null without a card processor or once the caller, i.e. its account or else its IP address ' +
            '(IPv6 per /64), has caused 5 new checkouts in 10 minutes). Session: `Payment-Receipt` ' +
            '`session:<id>:<nonce>`, `X-Session-Remaining` (USD) and `Payment-Receipt-Signature`. MPP: transfer `amount` of `currency` to `recipient`, then send ' +
            '`Authorization: Payment <base64url of {"challenge":{"nonce"},"payload":{"type":"hash","hash":"<tx hash>","signature"},"source":"did:pkh:eip155:<chainId>:<sender>"}>` ' +
            'where `signature` is the transfer sender\'s EIP-191 signature of "agent-platform MPP payment\\nnonce: <nonce>\\ntransaction: <tx hash, lower-case>" ' +
            '(only transfers from `source` count; docs/payments.md "MPP"); `Payment-Receipt` is the transaction hash. ' +
            'A plugin that fails before answering is not charged. `Accept: text/event-stream` streams `data: {plugin, delta}` events, then ' +
            '`data: {plugin, message, timestamp, payment, done:true}` and `data: [DONE]`. Errors: 400 `unknown_plugin` (session method) or bad input, ' +
            '401 `Unauthorized` (invalid key), 402 `payment_required`, `session_required`, `session_invalid`, `insufficient_balance` (`session.remaining`, `session.cost`), ' +
            '`voucher_failed`; 500 `internal`; 502 `no_plugin`.',
          headers: documentedHeaders({
            'x-plugin-id': 'overrides body `plugin`',
            'x-payment-method': '`stripe` (default), `mpp` or `session`',
            'x-session-id': 'payment session id (session method)',
            'x-wallet-address': 'address owning the session (session method)',
          }),
          body: jsonBody({ plugin: z.string().max(100, { error: 'Invalid plugin' }).optional() }).loose(),
          // documented as before: anyone may call (the account scope only learns who, when a key or cookie is sent)
          security: [],
          response: { 200: gatewayResponse, 400: errorSchema, 401: errorSchema, 402: errorSchema, 500: errorSchema, 502: errorSchema },
        },
        config: { callerOptional: true } satisfies AccountRouteConfig,
        handler: async (request, reply) => {
          const body = request.body as Record<string, unknown>;
          const pluginId = headerOf(request, 'x-plugin-id') || (typeof body.plugin === 'string' ? body.plugin : undefined) || 'agent';
          const authorization = typeof request.headers.authorization === 'string' ? request.headers.authorization : undefined;
          const isPayment = authorization !== undefined && /^Payment\s/i.test(authorization);
          // with `Authorization: Payment` the account scope saw no key, so a caller is the session's, on plan solo
          const caller = request.caller;
          const acct: PaidCallAccount | null = caller
            ? {
                userId: caller.userId,
                email: caller.email,
                plan: (isPayment ? 'solo' : caller.plan) as PaidCallAccount['plan'],
                isAdmin: caller.isAdmin,
              }
            : null;
          const accept = headerOf(request, 'accept') ?? '';
          const controller = new AbortController();
          reply.raw.once('close', () => {
            if (!reply.raw.writableFinished) controller.abort(new Error('client disconnected'));
          });
          const { plugin: _plugin, ...forwarded } = body;
          const outcome = await gateway.handle({
            pluginId,
            body: forwarded,
            paymentMethod: headerOf(request, 'x-payment-method'),
            authorization,
            sessionId: headerOf(request, SESSION_HEADER),
            walletAddress: headerOf(request, 'x-wallet-address'),
            stream: accept.includes('text/event-stream'),
            account: acct,
            clientIp: request.ip,
            signal: controller.signal,
          });
          if (!outcome.ok)
            return reply
              .code(outcome.status as 402)
              .headers(outcome.headers)
              .send(outcome.body as never);
          const headers = { ...outcome.headers, 'x-plugin-id': outcome.plugin };
          if (outcome.output.type === 'json') {
            return reply.headers(headers).send({
              plugin: outcome.plugin,
              message: outcome.output.message,
              ...(outcome.output.extra ?? {}),
              timestamp: new Date().toISOString(),
              payment: outcome.payment,
            });
          }
          return writeSse(request, reply, headers, outcome.plugin, outcome.payment, outcome.output.events);
        },
      });
    },
  };
};

async function writeSse(
  request: FastifyRequest,
  reply: FastifyReply,
  headers: Record<string, string>,
  plugin: string,
  payment: object,
  events: AsyncIterable<{ type: 'delta'; text: string } | { type: 'done'; content: string }>,
) {
  const res = startEventStream(request, reply, headers);
  try {
    for await (const ev of events) {
      if (res.destroyed) break;
      if (ev.type === 'delta') res.write(`data: ${JSON.stringify({ plugin, delta: ev.text })}\n\n`);
      else
        res.write(
          `data: ${JSON.stringify({ plugin, message: ev.content, timestamp: new Date().toISOString(), payment, done: true })}\n\ndata: [DONE]\n\n`,
        );
    }
  } catch (err) {
    if (!res.destroyed) {
      request.log.warn({ err: (err as Error).message }, 'gateway stream failed');
      res.write(`event: error\ndata: ${JSON.stringify({ error: ERROR_CODES.PLUGIN_FAILED.error })}\n\n`);
    }
  } finally {
    if (!res.destroyed) res.end();
  }
}
