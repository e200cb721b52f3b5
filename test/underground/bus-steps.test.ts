/** §4.15 Underground bus: the BOOKING_ negotiation and AMPLIFY_ fan-out steps (designed; see the route's description). */

import { describe, expect, it } from 'vitest';
import { AMPLIFY_MAX_RECIPIENTS } from '../../src/domains/underground/bus-steps.service.ts';

import { agents, drain, hookB, hookC, keyB, message, send, setupBusFixture, sign, t } from './bus-fixtures.ts';

setupBusFixture();

describe('BOOKING_ negotiation and AMPLIFY_ fan-out (§4.15, designed)', () => {
  const slot = () => new Date(Date.now() + 86_400_000).toISOString();

  it('a booking is requested, countered, accepted by the other party only, and closed; the recipient gets the state', async () => {
    const bookingId = `bk-${Date.now()}`;
    const req = await sign(message({ action: 'BOOKING_REQUEST', payload: { bookingId, slot: slot(), priceUsdc: '150.5' } }));
    expect((await send(req)).statusCode).toBe(200);
    await drain();
    expect(hookB.received.find((b) => b.message?.messageId === req.messageId)?.negotiation).toMatchObject({
      bookingId,
      state: 'open',
      priceUsdc: '150.5',
      rounds: 1,
      initiator: agents.a,
      counterparty: agents.b,
    });
    // B counters to A: A needs a webhook of its own to receive it
    await t.database.db.kysely
      .updateTable('agents')
      .set({ config: JSON.stringify({ underground: { webhookUrl: hookC.url } }) })
      .where('id', '=', agents.a)
      .execute();
    const counter = await sign(
      message({ action: 'BOOKING_COUNTER', from: agents.b, to: agents.a, payload: { bookingId, slot: slot(), priceUsdc: '175' } }),
      keyB,
    );
    expect((await send(counter)).statusCode).toBe(200);
    // B may not accept its own counter
    const selfAccept = await send(
      await sign(message({ action: 'BOOKING_ACCEPT', from: agents.b, to: agents.a, payload: { bookingId } }), keyB),
    );
    expect(selfAccept.statusCode).toBe(409);
    const accept = await sign(message({ action: 'BOOKING_ACCEPT', payload: { bookingId } }));
    expect((await send(accept)).statusCode).toBe(200);
    await drain();
    expect(hookB.received.find((b) => b.message?.messageId === accept.messageId)?.negotiation).toMatchObject({
      state: 'accepted',
      priceUsdc: '175',
      rounds: 2,
    });
    const late = await send(await sign(message({ action: 'BOOKING_OFFER', payload: { bookingId, slot: slot(), priceUsdc: '1' } })));
    expect(late.statusCode).toBe(409);
    expect(late.json().error).toMatch(/accepted/);
    const dup = await send(await sign(message({ action: 'BOOKING_REQUEST', payload: { bookingId, slot: slot(), priceUsdc: '1' } })));
    expect(dup.statusCode).toBe(409);
  });

  it('concurrent moves on one booking apply one at a time: of two parallel requests one opens it, of two parallel declines one closes it; a non-party is refused', async () => {
    const bookingId = `bk-race-${Date.now()}`;
    const terms = { bookingId, slot: slot(), priceUsdc: '10' };
    const opens = await Promise.all(
      [1, 2].map(async () => send(await sign(message({ action: 'BOOKING_REQUEST', to: agents.c, payload: terms })))),
    );
    expect(opens.map((r) => r.statusCode).sort()).toEqual([200, 409]);
    const [accept, decline] = await Promise.all([
      sign(message({ action: 'BOOKING_ACCEPT', from: agents.b, to: agents.a, payload: { bookingId } }), keyB),
      sign(message({ action: 'BOOKING_DECLINE', from: agents.b, to: agents.a, payload: { bookingId } }), keyB),
    ]);
    // B is not a party to A's booking with C
    expect((await send(accept)).statusCode).toBe(409);
    const own = await Promise.all([
      sign(message({ action: 'BOOKING_DECLINE', to: agents.c, payload: { bookingId } })),
      sign(message({ action: 'BOOKING_DECLINE', to: agents.c, payload: { bookingId } })),
    ]);
    const closes = await Promise.all(own.map((m) => send(m)));
    expect(closes.map((r) => r.statusCode).sort()).toEqual([200, 409]);
    expect((await send(decline)).statusCode).toBe(409);
    const row = await t.database.db.kysely
      .selectFrom('underground_bus_negotiations')
      .select(['state', 'rounds'])
      .where('booking_id', '=', bookingId)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ state: 'declined', rounds: 1 });
  });

  it('bad booking payloads are 400 and open nothing', async () => {
    for (const [payload, error] of [
      [{ slot: slot(), priceUsdc: '1' }, /bookingId/],
      [{ bookingId: 'x1', slot: 'tomorrow', priceUsdc: '1' }, /slot/],
      [{ bookingId: 'x1', slot: '2001-01-01T00:00:00Z', priceUsdc: '1' }, /future/],
      [{ bookingId: 'x1', slot: slot(), priceUsdc: 1 }, /priceUsdc/],
      [{ bookingId: 'x1', slot: slot(), priceUsdc: '0' }, /greater than 0/],
      [{ bookingId: 'x1', slot: slot(), priceUsdc: '1.1234567' }, /6 decimals/],
    ] as const) {
      const res = await send(await sign(message({ action: 'BOOKING_REQUEST', payload })));
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error).toMatch(error);
    }
    expect((await send(await sign(message({ action: 'BOOKING_HAGGLE', payload: { bookingId: 'x1' } })))).statusCode).toBe(400);
    const open = await t.database.db.kysely
      .selectFrom('underground_bus_negotiations')
      .select('booking_id')
      .where('booking_id', '=', 'x1')
      .execute();
    expect(open).toEqual([]);
  });

  it('AMPLIFY_ fans out to `to` and each listed recipient once, within the cap', async () => {
    const m = await sign(message({ action: 'AMPLIFY_EVENT', payload: { recipients: [agents.c, agents.c, agents.a], eventId: 'ev1' } }));
    const res = await send(m);
    expect(res.json()).toMatchObject({ deliveries: 2 });
    await drain();
    expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(1);
    expect(hookC.received.filter((b) => b.message?.messageId === m.messageId)).toEqual([
      { message: m, amplification: { recipients: [agents.c] } },
    ]);
    const tooMany = await send(
      await sign(
        message({
          action: 'AMPLIFY_EVENT',
          payload: { recipients: Array.from({ length: AMPLIFY_MAX_RECIPIENTS + 1 }, (_, i) => `ag-${i}`) },
        }),
      ),
    );
    expect(tooMany.statusCode).toBe(400);
    const unknown = await send(await sign(message({ action: 'AMPLIFY_EVENT', payload: { recipients: ['no-such-agent'] } })));
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error).toMatch(/unknown recipient/);
  });
});
