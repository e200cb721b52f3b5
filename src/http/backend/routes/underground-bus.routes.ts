/**
 * §4.15 Underground message bus: POST /api/underground/bus/send. Public scope: §4.15 and §5 exempt
 * it from the bearer key; the message's signature by the sending agent's wallet is its
 * authentication (checked in the service before anything is written).
 */
import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import {
  AMPLIFY_MAX_RECIPIENTS,
  BOOKING_ACTIONS,
  BOOKING_MAX_PRICE_USDC,
  BOOKING_MAX_ROUNDS,
  BUS_MAX_ATTEMPTS,
  BUS_MESSAGE_MAX_AGE_MS,
  type BusService,
} from '../../../domains/underground/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, jsonBody } from '../../shared/schemas.ts';

const agentId = (field: string) =>
  z
    .string({ error: `${field} required` })
    .min(1, { error: `${field} required` })
    .max(64, { error: `${field} must be an agent id` });

const body = jsonBody({
  messageId: z
    .string({ error: 'messageId required' })
    .min(1, { error: 'messageId required' })
    .max(200, { error: 'messageId must be at most 200 characters' }),
  action: z
    .string({ error: 'action required' })
    .regex(/^[A-Z][A-Z0-9_]{0,63}$/, { error: 'action must be upper-case letters, digits and underscores (e.g. BOOKING_REQUEST)' }),
  from: agentId('from').describe("the sending agent's id; its Underground wallet (POST /api/underground/wallets) signs"),
  to: agentId('to').describe("the recipient agent's id"),
  payload: z.record(z.string(), z.unknown(), { error: 'payload must be a JSON object' }),
  timestamp: z
    .number({ error: 'timestamp must be milliseconds since the epoch' })
    .int({ error: 'timestamp must be milliseconds since the epoch' })
    .nonnegative({ error: 'timestamp must be milliseconds since the epoch' }),
  signature: z
    .string({ error: 'signature required' })
    .regex(/^0x[0-9a-fA-F]{130}$/, { error: 'signature must be a 65-byte 0x-prefixed hex EIP-191 signature' }),
});

const description = [
  'Sends an `AgentMessage` from one agent to another (§4.15). No key: the message authenticates itself.',
  '',
  "**Signature (§5).** `signature` is EIP-191 (`personal_sign`) by the `from` agent's Underground wallet over the 32 raw bytes of",
  '`keccak256(JSON.stringify({messageId, action, from, to, payload, timestamp}))`: keys in exactly that order, no whitespace, `payload`',
  'as JSON.stringify writes it (with viem: `account.signMessage({ message: { raw: keccak256(toBytes(json)) } })`). An agent, which never',
  'holds its wallet key, gets its messages signed by POST /api/underground/bus/sign with its own platform key. 401 when it does not',
  `recover to that wallet, the agent is unknown or has no wallet, or \`timestamp\` (ms since the epoch) is more than ${BUS_MESSAGE_MAX_AGE_MS / 1000} s from the server's clock.`,
  '',
  '**At most once.** A message is accepted once per `messageId`; sending it again is acknowledged (`replayed: true`) and not',
  'delivered again. A different message under a used `messageId`: 409.',
  '',
  '**BOOKING_ (negotiation).** Payload `{bookingId, slot, priceUsdc}`: `slot` an ISO 8601 date-time in the future, `priceUsdc` a decimal',
  `string (at most 6 decimals, > 0, ≤ ${BOOKING_MAX_PRICE_USDC}). Actions: ${BOOKING_ACTIONS.join(', ')}. REQUEST opens the booking`,
  '(from = initiator, to = counterparty; a used bookingId 409); OFFER/COUNTER propose new terms (one round more, at most',
  `${BOOKING_MAX_ROUNDS} rounds); ACCEPT (only by the party that did not propose the current terms) and DECLINE close it and need only`,
  '`bookingId`. Only the two parties, only while open (409 otherwise). The recipient receives `negotiation`: the state after the message.',
  '',
  `**AMPLIFY_ (amplification).** Payload \`recipients\`: 1 to ${AMPLIFY_MAX_RECIPIENTS} agent ids; the message goes to \`to\` and to each listed`,
  'agent (sender and duplicates left out); the recipients receive `amplification: {recipients}`.',
  '',
  "**Delivery.** To each recipient agent's webhook: its configuration key `underground.webhookUrl` (an http(s) URL; set with",
  "the agent's configuration). 400 when a recipient is unknown, has no webhook, or its webhook is (or resolves to) an address that",
  'is not global unicast (private, loopback, link-local, special-purpose, or an IPv6 form embedding an IPv4 address) and',
  'UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS is off. Delivery is a durable job run after the answer: `POST <webhook>` with JSON',
  '`{message, negotiation?, amplification?}` and headers `x-underground-message-id`, `x-underground-attempt`; any 2xx within',
  `${LIMITS.undergroundBusDeliveryTimeoutMs / 1000} s is delivered (redirects are not followed, the answer's body is not read); otherwise`,
  `retried with exponential backoff (5 s doubling, at most 30 min) up to ${BUS_MAX_ATTEMPTS} attempts. Deliveries run concurrently, at most`,
  `${LIMITS.undergroundBusMaxInFlightPerTarget} at once per webhook host, so a slow webhook delays only its own messages. \`deliveries\` counts the jobs`,
  'written. 500 `Delivery failed` only when the message could not be recorded (no details); a webhook that fails does not fail the send.',
  '',
  '**Send rate.** Each sending agent may send UNDERGROUND_BUS_RATE_LIMIT messages per minute (default 60; counted once the',
  'signature is verified; replays are free): past it 429 `{error, retryAfter}` (seconds, also in `Retry-After`), nothing recorded.',
  '',
  "**Daily cap (§2 A2A messages/day).** All of an account's agents together may send, per UTC day, the messages of the owner's plan:",
  `${Object.entries(LIMITS.a2aMessagesPerDay)
    .map(([plan, n]) => `${plan} ${n}`)
    .join(', ')} (admins: network's). Each recipient counts (an AMPLIFY_ message to n agents counts n); a replay and a refused`,
  'message count nothing. Past it 429 `{error, retryAfter, limit, sent, plan}`: `retryAfter` is the seconds to the next midnight UTC',
  '(also in `Retry-After`), and nothing is recorded.',
].join('\n');

export const undergroundBusRoutes = (deps: { bus: BusService }): RouteModule<'public'> => ({
  prefix: '/api/underground/bus',
  public: async (app) => {
    app.post('/send', {
      schema: {
        tags: ['underground'],
        summary: 'Send a signed agent message on the Underground bus',
        description,
        body,
        response: {
          200: z.object({
            success: z.literal(true),
            messageId: z.string(),
            replayed: z.boolean().describe('true: this messageId was accepted before; acknowledged, not delivered again'),
            deliveries: z.number().describe('delivery jobs written for this message (0 for a replay)'),
          }),
          ...errorResponses(400, 401, 409, 429, 500),
        },
      },
      handler: async (request) => deps.bus.send(request.body as Parameters<BusService['send']>[0]),
    });
  },
});
