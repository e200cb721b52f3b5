/**
 * §4.15 Underground message bus and §5 "Message signature": POST /api/underground/bus/send through
 * the backend app (no key), real PostgreSQL, deliveries to local webhook receivers (test/fakes/webhook.ts)
 * by the delivery worker. Signatures made with viem accounts whose addresses are the agents' wallets.
 */

import { describe, expect, it } from 'vitest';
import { BUS_MESSAGE_MAX_AGE_MS } from '../../src/domains/underground/bus-message.rules.ts';

import { agents, deliveries, drain, hookB, message, newBus, send, setupBusFixture, sign, stranger, t } from './bus-fixtures.ts';

setupBusFixture();

describe('POST /api/underground/bus/send (§4.15)', () => {
  it("a message signed by the sender agent's wallet is delivered once to the recipient's webhook; a replay is acknowledged and not delivered again", async () => {
    const m = await sign(message());
    const res = await send(m);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true, messageId: m.messageId, replayed: false, deliveries: 1 });
    await drain();
    expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toEqual([{ message: m }]);

    const again = await send(m);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({ success: true, messageId: m.messageId, replayed: true, deliveries: 0 });
    await drain();
    expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(1);
    expect(await deliveries(m.messageId)).toMatchObject([{ state: 'delivered', attempts: 1 }]);
  });

  it('ten copies of one message sent at once: one delivery job, delivered once', async () => {
    const m = await sign(message());
    const all = await Promise.all(Array.from({ length: 10 }, () => send(m)));
    expect(all.map((r) => r.statusCode)).toEqual(Array(10).fill(200));
    expect(all.filter((r) => r.json().replayed === false)).toHaveLength(1);
    await Promise.all([drain(), drain()]);
    expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(1);
  });

  it('401 for a wrong signer, a tampered payload, an unknown sender, a sender without wallet, a stale timestamp; nothing recorded', async () => {
    const cases = [
      { body: await sign(message(), stranger), error: /Invalid signature/ },
      { body: { ...(await sign(message())), payload: { text: 'tampered' } }, error: /Invalid signature/ },
      { body: { ...(await sign(message())), to: agents.c }, error: /Invalid signature/ },
      { body: await sign(message({ from: 'no-such-agent' })), error: /no Underground wallet/ },
      { body: await sign(message({ from: agents.c })), error: /no Underground wallet/ },
      { body: await sign(message({ timestamp: Date.now() - BUS_MESSAGE_MAX_AGE_MS - 1000 })), error: /expired/ },
      { body: await sign(message({ timestamp: Date.now() + BUS_MESSAGE_MAX_AGE_MS + 60_000 })), error: /expired/ },
    ];
    for (const c of cases) {
      const res = await send(c.body);
      expect(res.statusCode, JSON.stringify(c.body)).toBe(401);
      expect(res.json().error).toMatch(c.error);
      expect(await deliveries(c.body.messageId)).toEqual([]);
    }
  });

  it('bad input is a 400 with a JSON error', async () => {
    const good = await sign(message());
    for (const [body, error] of [
      [{ ...good, signature: undefined }, /signature/],
      [{ ...good, signature: '0x1234' }, /signature/],
      [{ ...good, messageId: '' }, /messageId/],
      [{ ...good, action: 'lower case' }, /action/],
      [{ ...good, payload: [1, 2] }, /payload/],
      [{ ...good, timestamp: 'yesterday' }, /timestamp/],
      ['not json', /JSON|content type/i],
    ] as const) {
      const res = await send(body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error).toMatch(error);
    }
    // a recipient that does not exist or has no webhook
    for (const [to, error] of [
      ['no-such-agent', /unknown recipient/],
      [agents.d, /no webhook/],
    ] as const) {
      const m = await sign(message({ to }));
      const res = await send(m);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(error);
    }
  });

  it('a failing webhook is retried with backoff until it answers 2xx', async () => {
    hookB.status = 500;
    try {
      const m = await sign(message());
      expect((await send(m)).statusCode).toBe(200);
      const bus = newBus(true, 400);
      expect(await bus.processNext()).toBe(true);
      expect(await deliveries(m.messageId)).toMatchObject([{ state: 'pending', attempts: 1, last_error: 'webhook answered 500' }]);
      expect(await bus.processNext()).toBe(false); // not due before its backoff (400 ms)
      hookB.status = 200;
      await new Promise((r) => setTimeout(r, 450));
      await drain(bus);
      expect(await deliveries(m.messageId)).toMatchObject([{ state: 'delivered', attempts: 2 }]);
      expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(1);
    } finally {
      hookB.status = 200;
    }
  });

  it('the job survives a restart: recorded while no worker runs, delivered by a worker started afterwards', async () => {
    const m = await sign(message());
    expect((await send(m)).statusCode).toBe(200); // this platform's own worker was never started
    expect(await deliveries(m.messageId)).toMatchObject([{ state: 'pending', attempts: 0 }]);
    const bus = newBus();
    const worker = bus.worker;
    await worker.start();
    await expect.poll(async () => (await deliveries(m.messageId))[0]?.state, { timeout: 5000 }).toBe('delivered');
    await worker.stop();
    await bus.close();
    expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(1);
  });
});

describe('wiring', () => {
  it("the backend's startWorkers runs the bus worker, which a send wakes at once", async () => {
    await t.platform.startWorkers();
    const m = await sign(message());
    expect((await send(m)).statusCode).toBe(200);
    await expect.poll(async () => (await deliveries(m.messageId))[0]?.state, { timeout: 3000, interval: 50 }).toBe('delivered');
    expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(1);
  });
});
