/**
 * Underground (§4.15; backend, bearer key plus `x-user-id`/`x-user-email` user context, §5):
 * events, agent wallets and royalty splits. The bus (POST /api/underground/bus/send) is its own
 * module. The user is always the header's; `userId`/`fromAddress` in a body are ignored.
 */
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  type BusSigner,
  balanceSchema,
  createEventBody,
  createSplitBody,
  createWalletBody,
  eventSchema,
  splitResultSchema,
  type UndergroundService,
  type UndergroundWallets,
  walletSchema,
} from '../../../domains/underground/index.ts';
import { badRequest, unauthorized } from '../../../lib/errors.ts';
import { callingAgent } from '../../shared/agent-key-auth.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders, errorResponses, jsonBody } from '../../shared/schemas.ts';
import { actingUser, namesUser } from '../acting-user.ts';

const userHeaders = {
  'x-user-id': 'Required: the acting user (UUID); ownership is checked against it',
  'x-user-email': "The acting user's email (context only; ownership uses x-user-id)",
};
const errors = { ...errorResponses(400, 401, 403, 404, 500) };
const CONTEXT =
  'Bearer key plus user context (§5): `x-user-id` is required (401 `User context required` without it, 400 for a malformed one). ';

/** §4.15 needs a named user: unlike other backend routes there is no operator fallback. */
function contextUser(request: FastifyRequest): string {
  if (!namesUser(request)) throw unauthorized('User context required: send x-user-id');
  return actingUser(request);
}

const signBody = jsonBody({
  messageId: z
    .string()
    .min(1, { error: 'messageId must be 1 to 200 characters' })
    .max(200, { error: 'messageId must be 1 to 200 characters' })
    .optional()
    .describe('optional: your id for the message (a retry of the send must reuse it); a random UUID when absent'),
  action: z
    .string({ error: 'action required' })
    .regex(/^[A-Z][A-Z0-9_]{0,63}$/, { error: 'action must be upper-case letters, digits and underscores (e.g. BOOKING_REQUEST)' }),
  to: z
    .string({ error: 'to required' })
    .min(1, { error: 'to required' })
    .max(64, { error: 'to must be an agent id' })
    .describe("the recipient agent's id"),
  payload: z.record(z.string(), z.unknown(), { error: 'payload must be a JSON object' }),
});
const signedMessage = z.object({
  messageId: z.string(),
  action: z.string(),
  from: z.string().describe('the calling agent (always: the key decides it)'),
  to: z.string(),
  payload: z.record(z.string(), z.unknown()),
  timestamp: z.number().describe("the server's clock, ms since the epoch: send within 5 minutes"),
  signature: z.string().describe("EIP-191 signature by the calling agent's Underground wallet"),
});
const SIGN_DESCRIPTION =
  "Signs an `AgentMessage` with the calling agent's Underground wallet and returns it, for `POST /api/underground/bus/send`. " +
  'The caller is the agent its own platform key (`Authorization: Bearer apk_…`, issued at deploy time) names: 401 without a valid one. ' +
  "`from` is always that agent and `timestamp` the server's clock; the agent chooses `action`, `to`, `payload` and optionally " +
  '`messageId`. The wallet key is unsealed for the one signature and never returned. Only the canonical message JSON the platform builds ' +
  'is ever signed (EIP-191 over its keccak256), never bytes the caller supplies, so the route cannot sign a transfer of the wallet. ' +
  '404 when the agent has no Underground wallet (its owner creates one with POST /api/underground/wallets). ' +
  'Send the answer as is: re-serialising `payload` with its keys in another order changes what was signed.';

export const undergroundRoutes = (deps: {
  underground: UndergroundService;
  wallets: UndergroundWallets;
  signer: BusSigner;
}): RouteModule<'bearer' | 'agentKey'> => ({
  prefix: '/api/underground',
  // an agent signs bus messages with its own key (docs/underground.md "Signing for an agent")
  agentKey: async (app) => {
    app.post('/bus/sign', {
      schema: {
        tags: ['underground'],
        summary: 'Sign a bus message as the calling agent',
        description: SIGN_DESCRIPTION,
        body: signBody,
        response: { 200: signedMessage, ...errorResponses(400, 401, 404) },
      },
      handler: async (request) => deps.signer.sign(callingAgent(request), request.body),
    });
  },
  bearer: async (app) => {
    app.get('/events', {
      schema: {
        tags: ['underground'],
        summary: "The caller's Underground events (§4.15)",
        description: `${CONTEXT}Events of the agents the caller owns, newest event date first (at most 500).`,
        headers: documentedHeaders(userHeaders),
        response: { 200: z.array(eventSchema), ...errors },
      },
      handler: async (request) => deps.underground.listEvents(contextUser(request)),
    });

    app.post('/events', {
      schema: {
        tags: ['underground'],
        summary: 'Create an Underground event (§4.15, §2 "Underground event")',
        description:
          `${CONTEXT}Every field is required: \`agentId\` (an agent the caller owns: 403 another user's, 404 none), \`name\`, \`description\`, ` +
          '`venue`, `eventDate` (ISO 8601 date, or date-time with `Z` or an offset), `ticketPriceUsdc` (decimal string, at most 6 decimals), `totalTickets` (whole number 1–1000000).',
        headers: documentedHeaders(userHeaders),
        body: createEventBody,
        response: { 201: eventSchema, ...errors },
      },
      handler: async (request, reply) => {
        const event = await deps.underground.createEvent(contextUser(request), request.body);
        return reply.code(201).send(event);
      },
    });

    app.post('/wallets', {
      schema: {
        tags: ['underground'],
        summary: "Create an agent's Underground wallet (§4.15)",
        description:
          `${CONTEXT}One key pair per agent, generated by the platform; the private key is stored encrypted and never returned. ` +
          'Idempotent per agent: the first call answers 201, a repeat 200 with the same address (parallel calls agree on one). ' +
          "A body `userId` is ignored. 403 for another user's agent, 404 for none.",
        headers: documentedHeaders(userHeaders),
        body: createWalletBody,
        response: { 200: walletSchema, 201: walletSchema, ...errors },
      },
      handler: async (request, reply) => {
        const { created, wallet } = await deps.wallets.create(contextUser(request), request.body.agentId);
        return reply.code(created ? 201 : 200).send(wallet);
      },
    });

    app.get('/wallets/:address/balance', {
      schema: {
        tags: ['underground'],
        summary: "An agent wallet's USDC balance on Base (§4.15)",
        description:
          `${CONTEXT}Reads the address's USDC (6 decimals) on Base through BASE_RPC_URL. Only the caller's agents' wallets: ` +
          "403 another user's, 404 an address that is no agent wallet, 400 a malformed address, 500 `RPC_FAILED` when the chain RPC fails.",
        headers: documentedHeaders(userHeaders),
        params: z.object({ address: z.string().max(100) }),
        response: { 200: balanceSchema, ...errors },
      },
      handler: async (request) => deps.wallets.balance(contextUser(request), request.params.address),
    });

    app.post('/splits', {
      schema: {
        tags: ['underground'],
        summary: 'Record and pay a royalty split (§4.15, §2 "Royalty split")',
        description:
          `${CONTEXT}\`agentId\` (owned by the caller), \`name\`, \`totalAmount\` (USDC decimal string, above 0, at most 6 decimals) and ` +
          '`recipients` (1–100, each `address` once and `share` a percentage above 0 with at most 2 decimals; the shares must sum to exactly 100). ' +
          "Processed synchronously in one transaction: each recipient's amount is computed in integer micro-USDC (floor of its share; the " +
          'micros left over go one each to the first recipients, so the amounts sum exactly to the total), the total is debited from the ' +
          "caller's wallet balance (GET /api/wallet on the web app, 1 USDC = 1 USD) and each recipient's address is credited its amount in " +
          'the payments ledger, where any address can hold a balance (a recipient with no account spends it once signed in with that address). ' +
          'A balance that does not cover the total: 402 (`error` `insufficient_balance`, with `message`, `balance`, `cost`) and nothing is written. ' +
          'Header `Idempotency-Key` (1–200 characters): a repeat with the same key returns the first split (200; 201 when created) and pays nothing again, the same key ' +
          'with a different request is 409. `userId` and `fromAddress` in the body are ignored.',
        headers: documentedHeaders({ ...userHeaders, 'idempotency-key': 'Optional: retries with the same key create one split' }),
        body: createSplitBody,
        response: { 200: splitResultSchema, 201: splitResultSchema, ...errors, ...errorResponses(402, 409) },
      },
      handler: async (request, reply) => {
        const userId = contextUser(request);
        const raw = request.headers['idempotency-key'];
        if (raw !== undefined && (typeof raw !== 'string' || raw.length < 1 || raw.length > 200)) {
          throw badRequest('Idempotency-Key must be 1 to 200 characters');
        }
        const { created, body } = await deps.underground.createSplit(userId, request.body, raw);
        return reply.code(created ? 201 : 200).send(body);
      },
    });
  },
});
