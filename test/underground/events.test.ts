/**
 * §4.15 Underground events (§2 "Underground event"): create with every field required and
 * validated, list of the caller's agents' events newest event date first, user context from
 * `x-user-id` only, 403 for another user's agent; bad input changes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { as, counts, type Owner, ownerWithAgent } from './fixtures.ts';

let t: TestPlatform;
let alice: Owner;
let bob: Owner;

beforeAll(async () => {
  t = await startTestPlatform();
  alice = await ownerWithAgent(t);
  bob = await ownerWithAgent(t);
});
afterAll(() => t?.close());

const event = (agentId: string, over: Record<string, unknown> = {}) => ({
  agentId,
  name: 'Warehouse night',
  description: 'Four DJs, one room',
  venue: 'Unit 4, Hackney Wick',
  eventDate: '2026-12-31T21:00:00Z',
  ticketPriceUsdc: '12.50',
  totalTickets: 300,
  ...over,
});

describe('§4.15 POST/GET /api/underground/events', () => {
  it('creates an event (201, every §2 field) and lists the caller’s events newest event date first', async () => {
    const early = await as(t, alice, {
      method: 'POST',
      url: '/api/underground/events',
      payload: event(alice.agentId, { eventDate: '2026-06-01' }),
    });
    expect(early.statusCode).toBe(201);
    expect(early.json()).toEqual({
      id: expect.any(Number),
      agent_id: alice.agentId,
      name: 'Warehouse night',
      description: 'Four DJs, one room',
      venue: 'Unit 4, Hackney Wick',
      event_date: '2026-06-01T00:00:00.000Z',
      ticket_price_usdc: '12.50',
      total_tickets: 300,
      created_at: expect.any(String),
    });
    const late = await as(t, alice, {
      method: 'POST',
      url: '/api/underground/events',
      payload: event(alice.agentId, { name: 'NYE', eventDate: '2026-12-31T22:00:00+01:00' }),
    });
    expect(late.statusCode).toBe(201);
    const bobs = await as(t, bob, { method: 'POST', url: '/api/underground/events', payload: event(bob.agentId, { name: 'Bob only' }) });
    expect(bobs.statusCode).toBe(201);

    const list = await as(t, alice, { method: 'GET', url: '/api/underground/events' });
    expect(list.statusCode).toBe(200);
    expect(list.json().map((e: { name: string }) => e.name)).toEqual(['NYE', 'Warehouse night']);
    // the offset is kept: 22:00 at +01:00 is 21:00 UTC
    expect(list.json()[0].event_date).toBe('2026-12-31T21:00:00.000Z');
    const bobList = await as(t, bob, { method: 'GET', url: '/api/underground/events' });
    expect(bobList.json().map((e: { name: string }) => e.name)).toEqual(['Bob only']);
  });

  it("refuses another user's agent (403) and an unknown agent (404); nothing is written", async () => {
    const before = await counts(t);
    const other = await as(t, alice, { method: 'POST', url: '/api/underground/events', payload: event(bob.agentId) });
    expect(other.statusCode).toBe(403);
    expect(other.json().error).toEqual(expect.any(String));
    // a body userId naming the owner changes nothing: the user is the header's
    const smuggled = await as(t, alice, {
      method: 'POST',
      url: '/api/underground/events',
      payload: { ...event(bob.agentId), userId: bob.id },
    });
    expect(smuggled.statusCode).toBe(403);
    const none = await as(t, alice, { method: 'POST', url: '/api/underground/events', payload: event('no-such-agent') });
    expect(none.statusCode).toBe(404);
    expect(await counts(t)).toEqual(before);
  });

  it('needs the bearer key and a user context', async () => {
    const noKey = await t.backend.inject({ method: 'GET', url: '/api/underground/events', headers: { 'x-user-id': alice.id } });
    expect(noKey.statusCode).toBe(401);
    const noUser = await as(t, null, { method: 'GET', url: '/api/underground/events' });
    expect(noUser.statusCode).toBe(401);
    expect(noUser.json().error).toMatch(/x-user-id/);
    const badUser = await as(t, null, { method: 'GET', url: '/api/underground/events', headers: { 'x-user-id': 'not-a-uuid' } });
    expect(badUser.statusCode).toBe(400);
  });

  it.each([
    ['agentId missing', { agentId: undefined }, /agentId is required/],
    ['name missing', { name: undefined }, /name is required/],
    ['name blank', { name: '   ' }, /name is required/],
    ['description missing', { description: undefined }, /description is required/],
    ['venue missing', { venue: undefined }, /venue is required/],
    ['eventDate missing', { eventDate: undefined }, /eventDate is required/],
    ['eventDate not a date', { eventDate: 'next friday' }, /eventDate must be an ISO 8601/],
    ['eventDate impossible', { eventDate: '2026-13-45' }, /eventDate must be an ISO 8601/],
    ['eventDate 30 February', { eventDate: '2026-02-30' }, /eventDate must be an ISO 8601/],
    ['eventDate time without timezone', { eventDate: '2026-06-01T20:00:00' }, /with a timezone/],
    ['eventDate hour 24', { eventDate: '2026-06-01T24:00:00Z' }, /eventDate must be an ISO 8601/],
    ['ticketPriceUsdc missing', { ticketPriceUsdc: undefined }, /ticketPriceUsdc is required/],
    ['ticketPriceUsdc a number', { ticketPriceUsdc: 12.5 }, /ticketPriceUsdc must be a decimal string/],
    ['ticketPriceUsdc negative', { ticketPriceUsdc: '-1' }, /ticketPriceUsdc must be a decimal string/],
    ['ticketPriceUsdc 7 decimals', { ticketPriceUsdc: '1.1234567' }, /at most 6 decimals/],
    ['totalTickets missing', { totalTickets: undefined }, /totalTickets is required/],
    ['totalTickets a string', { totalTickets: '300' }, /totalTickets must be a number/],
    ['totalTickets zero', { totalTickets: 0 }, /totalTickets must be at least 1/],
    ['totalTickets fractional', { totalTickets: 1.5 }, /whole number/],
    ['name too long', { name: 'x'.repeat(201) }, /at most 200/],
  ])('400 for %s, nothing written', async (_label, over, message) => {
    const before = await counts(t);
    const res = await as(t, alice, { method: 'POST', url: '/api/underground/events', payload: event(alice.agentId, over) });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(message);
    expect(await counts(t)).toEqual(before);
  });

  it('400 for a body that is not an object', async () => {
    const res = await as(t, alice, {
      method: 'POST',
      url: '/api/underground/events',
      payload: '[1]',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toEqual(expect.any(String));
  });
});
