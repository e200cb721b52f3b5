/**
 * §4.15 bus send rate (docs/underground.md "Delivery"): each sending agent sends at most
 * UNDERGROUND_BUS_RATE_LIMIT messages a minute; past it POST /api/underground/bus/send answers 429
 * with a sentence and `retryAfter`, and records nothing. Forged messages in the agent's name and
 * replays of its messages (which every recipient holds) do not spend its allowance.
 */
import { describe, expect, it } from 'vitest';
import { agents, deliveries, keyB, message, send, setupBusFixture, sign, stranger } from './bus-fixtures.ts';

const LIMIT = 3;
setupBusFixture({ UNDERGROUND_BUS_RATE_LIMIT: String(LIMIT) });

describe('send rate per sending agent', () => {
  it(`past ${LIMIT} messages a minute the sender gets 429 with retryAfter; forgeries and replays do not count; another sender is unaffected`, async () => {
    // somebody else posts messages in A's name: refused by the signature, not counted against A
    for (let i = 0; i < LIMIT + 2; i++) expect((await send(await sign(message(), stranger))).statusCode).toBe(401);

    const sent = [];
    for (let i = 0; i < LIMIT; i++) {
      const m = await sign(message());
      const res = await send(m);
      expect(res.statusCode, `message ${i + 1}`).toBe(200);
      sent.push(m);
    }
    // the recipient re-posts a message it received: acknowledged, free
    const replay = await send(sent[0]);
    expect(replay.statusCode).toBe(200);
    expect(replay.json()).toMatchObject({ replayed: true });

    const over = await sign(message());
    const res = await send(over);
    expect(res.statusCode).toBe(429);
    const body = res.json();
    expect(body.error).toMatch(new RegExp(`at most ${LIMIT} per minute`));
    expect(body.retryAfter).toBeGreaterThanOrEqual(1);
    expect(body.retryAfter).toBeLessThanOrEqual(60);
    expect(res.headers['retry-after']).toBe(String(body.retryAfter));
    expect(await deliveries(over.messageId)).toEqual([]);

    // the limit is per sender: B still sends
    const fromB = await sign(message({ from: agents.b, to: agents.c }), keyB);
    expect((await send(fromB)).statusCode).toBe(200);
  });
});
