/**
 * The v1 gateway (§4.8 POST /api/v1/gateway): a plugin call paid from the caller's balance, by
 * MPP or from a payment session (docs/payments.md). In the account scope with the caller optional:
 * a key or a cookie says who pays from a balance; anyone else pays per call. Thin: validation, one
 * service call, the answer as JSON or an event stream.
 */
import { z } from 'zod';
import type { PaidCallAccount, PaidCallsService } from '../../../domains/payments/index.ts';
import { ERROR_CODES } from '../../../lib/error-codes.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders, errorResponses, headerText, jsonBody } from '../../shared/schemas.ts';
import type { AccountRouteConfig } from '../../shared/session.ts';
import { writeEventStream } from '../../shared/sse.ts';

const SESSION_HEADER = 'x-session-id';

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

export const paidCallsRoutes = (deps: { gateway: PaidCallsService }): RouteModule<'account'> => {
  const { gateway } = deps;
  return {
    prefix: '/api',
    // a caller with an account pays from its balance; anyone else pays per call (402): the caller is optional
    account: async (app) => {
      app.post('/v1/gateway', {
        schema: {
          tags: ['gateway'],
          summary: 'Call a plugin, paid by card balance, MPP or a payment session',
          description:
            "Plugins and prices per call: `agent` $0.05 (the caller's running agent, else the AI layer; streams; with an API key limited to some agents only one of those, 404 when none of them runs), `generate-text` $0.01 (AI layer; streams), " +
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
            '`voucher_failed`; 404 (`agent` with a key limited to agents none of which runs); 500 `internal`; 502 `no_plugin`.',
          headers: documentedHeaders({
            'x-plugin-id': 'overrides body `plugin`',
            'x-payment-method': '`stripe` (default), `mpp` or `session`',
            'x-session-id': 'payment session id (session method)',
            'x-wallet-address': 'address owning the session (session method)',
          }),
          body: jsonBody({ plugin: z.string().max(100, { error: 'Invalid plugin' }).optional() }).loose(),
          // documented as before: anyone may call (the account scope only learns who, when a key or cookie is sent)
          security: [],
          response: { 200: gatewayResponse, ...errorResponses(400, 401, 402, 404, 500, 502) },
        },
        config: { callerOptional: true } satisfies AccountRouteConfig,
        handler: async (request, reply) => {
          const body = request.body as Record<string, unknown>;
          const pluginId = headerText(request, 'x-plugin-id') || (typeof body.plugin === 'string' ? body.plugin : undefined) || 'agent';
          // the MPP proof (docs/payments.md "MPP"), not an account credential: the account scope passes it by
          // (docs/architecture.md "Routes and scopes"), so a caller sent with it is the session's, on plan solo
          const authorization = typeof request.headers.authorization === 'string' ? request.headers.authorization : undefined;
          const isPayment = authorization !== undefined && /^Payment\s/i.test(authorization);
          const caller = request.caller;
          const acct: PaidCallAccount | null = caller
            ? {
                userId: caller.userId,
                email: caller.email,
                plan: (isPayment ? 'solo' : caller.plan) as PaidCallAccount['plan'],
                isAdmin: caller.isAdmin,
                key: caller.key ? { id: caller.key.id, agentIds: caller.key.agentIds } : null,
              }
            : null;
          const accept = headerText(request, 'accept') ?? '';
          const controller = new AbortController();
          reply.raw.once('close', () => {
            if (!reply.raw.writableFinished) controller.abort(new Error('client disconnected'));
          });
          const { plugin: _plugin, ...forwarded } = body;
          const outcome = await gateway.handle({
            pluginId,
            body: forwarded,
            paymentMethod: headerText(request, 'x-payment-method'),
            authorization,
            sessionId: headerText(request, SESSION_HEADER),
            walletAddress: headerText(request, 'x-wallet-address'),
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
          const { plugin, payment } = outcome;
          return writeEventStream(request, reply, outcome.output.events, {
            headers,
            frame: (ev) =>
              ev.type === 'delta'
                ? `data: ${JSON.stringify({ plugin, delta: ev.text })}\n\n`
                : `data: ${JSON.stringify({ plugin, message: ev.content, timestamp: new Date().toISOString(), payment, done: true })}\n\ndata: [DONE]\n\n`,
            failure: {
              log: 'gateway stream failed',
              frame: `event: error\ndata: ${JSON.stringify({ error: ERROR_CODES.PLUGIN_FAILED.error })}\n\n`,
            },
          });
        },
      });
    },
  };
};
