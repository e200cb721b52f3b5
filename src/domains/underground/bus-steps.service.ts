/**
 * The steps §4.15 runs before delivery: actions prefixed `BOOKING_` "go through negotiation",
 * `AMPLIFY_` "through amplification". The specification does not show either; designed here (and in
 * the route's OpenAPI description):
 *
 * Negotiation. A booking is negotiated between two agents under a `bookingId` the initiator picks.
 * Payload `{bookingId, slot, priceUsdc}`: `slot` an ISO 8601 date-time in the future, `priceUsdc` a
 * decimal string with at most 6 decimals, above 0 and at most BOOKING_MAX_PRICE_USDC.
 * - BOOKING_REQUEST opens it (from = initiator, to = counterparty; a used bookingId: 409).
 * - BOOKING_OFFER / BOOKING_COUNTER propose new terms (slot and price); one round more, at most
 *   BOOKING_MAX_ROUNDS rounds.
 * - BOOKING_ACCEPT (only the party that did not propose the current terms) and BOOKING_DECLINE
 *   (either party) close it; `slot`/`priceUsdc` are not needed.
 * Only the two parties may move it, only while it is open (409 otherwise); any other BOOKING_
 * action is 400. The recipient receives the negotiation's state after the message.
 *
 * Amplification. Payload `recipients`: agent ids (1 to AMPLIFY_MAX_RECIPIENTS, each a known agent
 * with a webhook). The message is delivered to `to` and to every listed agent (the sender and
 * duplicates left out), each delivery its own durable job.
 */

import type { Tx } from '../../db/client.ts';
import { badRequest, conflict } from '../../lib/errors.ts';
import { busRepo, type NegotiationRow } from './bus.repo.ts';
import type { AgentMessage } from './bus-message.rules.ts';

export const BOOKING_MAX_PRICE_USDC = 1_000_000;
export const BOOKING_MAX_ROUNDS = 20;
export const AMPLIFY_MAX_RECIPIENTS = 20;
export const BOOKING_ACTIONS = ['BOOKING_REQUEST', 'BOOKING_OFFER', 'BOOKING_COUNTER', 'BOOKING_ACCEPT', 'BOOKING_DECLINE'] as const;

export type NegotiationState = {
  bookingId: string;
  state: NegotiationRow['state'];
  slot: string;
  priceUsdc: string;
  rounds: number;
  initiator: string;
  counterparty: string;
};

const PRICE = /^(0|[1-9]\d{0,6})(\.\d{1,6})?$/;

/** A USDC decimal string in integer micro-USDC (6 decimals, no floating point). */
export function parsePriceMicro(v: unknown): bigint {
  if (typeof v !== 'string' || !PRICE.test(v)) throw badRequest('payload.priceUsdc must be a decimal string with at most 6 decimals');
  const [whole, frac = ''] = v.split('.');
  const micro = BigInt(whole as string) * 1_000_000n + BigInt(frac.padEnd(6, '0'));
  if (micro <= 0n) throw badRequest('payload.priceUsdc must be greater than 0');
  if (micro > BigInt(BOOKING_MAX_PRICE_USDC) * 1_000_000n) throw badRequest(`payload.priceUsdc must be at most ${BOOKING_MAX_PRICE_USDC}`);
  return micro;
}

export const formatMicro = (micro: bigint): string => {
  const frac = (micro % 1_000_000n).toString().padStart(6, '0').replace(/0+$/, '');
  return `${micro / 1_000_000n}${frac ? `.${frac}` : ''}`;
};

function parseSlot(v: unknown, now: Date): Date {
  const d = typeof v === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(v) ? new Date(v) : null;
  if (!d || Number.isNaN(d.getTime())) throw badRequest('payload.slot must be an ISO 8601 date-time');
  if (d.getTime() <= now.getTime()) throw badRequest('payload.slot must be in the future');
  return d;
}

function bookingId(payload: Record<string, unknown>): string {
  const id = payload.bookingId;
  if (typeof id !== 'string' || id.length < 1 || id.length > 200)
    throw badRequest('payload.bookingId must be a string of 1 to 200 characters');
  return id;
}

/** Validates a BOOKING_ payload before anything is written (the route's 400s). */
type Terms = { bookingId: string; slot?: Date; priceMicro?: bigint };

export function checkBookingPayload(m: AgentMessage, now: Date): Terms {
  if (!(BOOKING_ACTIONS as readonly string[]).includes(m.action))
    throw badRequest(`unknown booking action: use one of ${BOOKING_ACTIONS.join(', ')}`);
  const id = bookingId(m.payload);
  const proposes = m.action === 'BOOKING_REQUEST' || m.action === 'BOOKING_OFFER' || m.action === 'BOOKING_COUNTER';
  return proposes
    ? { bookingId: id, slot: parseSlot(m.payload.slot, now), priceMicro: parsePriceMicro(m.payload.priceUsdc) }
    : { bookingId: id };
}

/** Applies the message to its negotiation inside the send transaction; the state after it. */
export async function negotiate(trx: Tx, m: AgentMessage, now: Date): Promise<NegotiationState> {
  const terms = checkBookingPayload(m, now);
  const view = (n: {
    state: NegotiationRow['state'];
    slot: Date;
    priceMicro: bigint;
    rounds: number;
    initiator: string;
    counterparty: string;
  }) => ({
    bookingId: terms.bookingId,
    state: n.state,
    slot: n.slot.toISOString(),
    priceUsdc: formatMicro(n.priceMicro),
    rounds: n.rounds,
    initiator: n.initiator,
    counterparty: n.counterparty,
  });
  if (m.action === 'BOOKING_REQUEST') {
    const { slot, priceMicro } = terms as Required<Terms>;
    const opened = await busRepo.openNegotiation(trx, {
      bookingId: terms.bookingId,
      slot,
      priceMicro,
      from: m.from,
      to: m.to,
      messageId: m.messageId,
    });
    if (!opened) throw conflict(`booking ${terms.bookingId} already exists`);
    return view({ slot, priceMicro, state: 'open', rounds: 1, initiator: m.from, counterparty: m.to });
  }
  const row = await busRepo.negotiationForUpdate(trx, terms.bookingId);
  if (!row) throw conflict(`booking ${terms.bookingId} does not exist: open it with BOOKING_REQUEST`);
  const parties = [row.initiator_agent_id, row.counterparty_agent_id];
  if (!parties.includes(m.from) || !parties.includes(m.to) || m.from === m.to)
    throw conflict(`booking ${terms.bookingId} is between other agents`);
  if (row.state !== 'open') throw conflict(`booking ${terms.bookingId} is ${row.state}`);
  let next: { state: NegotiationRow['state']; slot: Date; priceMicro: bigint; rounds: number; proposedBy: string } = {
    state: row.state,
    slot: row.slot,
    priceMicro: BigInt(row.price_micro_usdc),
    rounds: row.rounds,
    proposedBy: row.proposed_by,
  };
  if (terms.slot && terms.priceMicro !== undefined) {
    if (row.rounds >= BOOKING_MAX_ROUNDS)
      throw conflict(`booking ${terms.bookingId} reached ${BOOKING_MAX_ROUNDS} rounds: accept or decline`);
    next = { state: 'open', slot: terms.slot, priceMicro: terms.priceMicro, rounds: row.rounds + 1, proposedBy: m.from };
  } else if (m.action === 'BOOKING_ACCEPT') {
    if (row.proposed_by === m.from) throw conflict('the current terms are your own proposal: the other party accepts them');
    next = { ...next, state: 'accepted' };
  } else next = { ...next, state: 'declined' };
  await busRepo.updateNegotiation(trx, terms.bookingId, { ...next, messageId: m.messageId });
  return view({ ...next, initiator: row.initiator_agent_id, counterparty: row.counterparty_agent_id });
}

/** The agents an AMPLIFY_ message goes to besides `to` (validated; sender and duplicates removed). */
export function amplificationRecipients(m: AgentMessage): string[] {
  const list = m.payload.recipients;
  if (!Array.isArray(list) || list.length === 0 || list.length > AMPLIFY_MAX_RECIPIENTS)
    throw badRequest(`payload.recipients must be a list of 1 to ${AMPLIFY_MAX_RECIPIENTS} agent ids`);
  if (!list.every((r) => typeof r === 'string' && r.length > 0 && r.length <= 64)) throw badRequest('payload.recipients must be agent ids');
  return [...new Set(list as string[])].filter((r) => r !== m.from && r !== m.to);
}
