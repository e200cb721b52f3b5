/**
 * §4.15 Underground message bus and §5 "Message signature": POST /api/underground/bus/send through
 * the backend app (no key), real PostgreSQL, deliveries to local webhook receivers (test/fakes/webhook.ts)
 * by the delivery worker. Signatures made with viem accounts whose addresses are the agents' wallets.
 */

import { fetch as undiciFetch } from 'undici';
import { type Hex, keccak256, toBytes } from 'viem';
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBusService } from '../../src/domains/underground/bus.service.ts';
import { checkWebhookUrl, createGuardedDispatcher, isPublicAddress } from '../../src/domains/underground/bus-address-guard.ts';
import { BUS_MESSAGE_MAX_AGE_MS } from '../../src/domains/underground/bus-message.ts';
import { AMPLIFY_MAX_RECIPIENTS } from '../../src/domains/underground/bus-steps.ts';
import { encryptSecret } from '../../src/lib/crypto.ts';
import { createUndergroundBusWorker } from '../../src/workers/underground-bus.ts';
import { type FakeWebhook, startFakeWebhook } from '../fakes/webhook.ts';
import { startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
let hookB: FakeWebhook;
let hookC: FakeWebhook;
/** sender A (wallet), recipients B and C (webhooks), D (no webhook), F (webhook the SSRF test moves) */
const agents: Record<'a' | 'b' | 'c' | 'd' | 'f', string> = { a: '', b: '', c: '', d: '', f: '' };
const keyA = privateKeyToAccount(generatePrivateKey());
const keyB = privateKeyToAccount(generatePrivateKey());
const stranger = privateKeyToAccount(generatePrivateKey());

/** A delivery worker of its own, as a second backend process would run (retries after 20 ms). */
const newBus = (allowPrivate = true, retryBaseMs = 20) =>
  createBusService({ db: t.database.db, allowPrivateWebhooks: allowPrivate, retryBaseMs });
const drain = async (bus = newBus()) => {
  while (await bus.processNext()) {}
  await bus.close();
};

type Unsigned = { messageId: string; action: string; from: string; to: string; payload: Record<string, unknown>; timestamp: number };
let seq = 0;
const message = (over: Partial<Unsigned> = {}): Unsigned => ({
  messageId: `msg-${Date.now()}-${seq++}`,
  action: 'HELLO',
  from: agents.a,
  to: agents.b,
  payload: { text: 'hi' },
  timestamp: Date.now(),
  ...over,
});
/** The documented canonical form, written out here rather than imported, so a change to it fails this test. */
async function sign(m: Unsigned, by: PrivateKeyAccount = keyA) {
  const json = JSON.stringify({
    messageId: m.messageId,
    action: m.action,
    from: m.from,
    to: m.to,
    payload: m.payload,
    timestamp: m.timestamp,
  });
  const signature: Hex = await by.signMessage({ message: { raw: keccak256(toBytes(json)) } });
  return { ...m, signature };
}
const send = (body: unknown) => t.backend.inject({ method: 'POST', url: '/api/underground/bus/send', payload: body as object });
const deliveries = (messageId: string) =>
  t.database.db.kysely.selectFrom('underground_bus_deliveries').selectAll().where('message_id', '=', messageId).execute();

beforeAll(async () => {
  t = await startTestPlatform({ UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS: 'true' });
  [hookB, hookC] = await Promise.all([startFakeWebhook(), startFakeWebhook()]);
  const k = t.database.db.kysely;
  // agents of different users; the rows are setup, not the behaviour under test
  for (const name of Object.keys(agents) as (keyof typeof agents)[]) {
    const tag = `${name}${Date.now().toString(36)}`;
    const user = await k
      .insertInto('users')
      .values({ email: `bus-${tag}@example.com`, name: tag, referral_code: `BUS-${tag.toUpperCase()}` })
      .returning('id')
      .executeTakeFirstOrThrow();
    agents[name] = `bus-agent-${tag}`;
    await k
      .insertInto('agents')
      .values({ id: agents[name], user_id: user.id, name, subdomain: agents[name], url: 'http://agent.test' })
      .execute();
  }
  const hooks: Record<string, string> = {
    [agents.b]: hookB.url,
    [agents.c]: hookC.url,
    [agents.f]: hookC.url,
  };
  for (const [id, url] of Object.entries(hooks))
    await k
      .updateTable('agents')
      .set({ config: JSON.stringify({ underground: { webhookUrl: url } }) })
      .where('id', '=', id)
      .execute();
  for (const [id, acct] of [
    [agents.a, keyA],
    [agents.b, keyB],
  ] as const) {
    const owner = await k.selectFrom('agents').select('user_id').where('id', '=', id).executeTakeFirstOrThrow();
    await k
      .insertInto('underground_agent_wallets')
      .values({
        agent_id: id,
        user_id: owner.user_id,
        address: acct.address,
        private_key_enc: encryptSecret(TEST_SECRETS.walletEncryptionKey, 'unused'),
      })
      .execute();
  }
});
afterAll(async () => {
  await Promise.all([hookB?.close(), hookC?.close()]);
  await t?.close();
});

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
    const worker = createUndergroundBusWorker({ bus, pollMs: 20 });
    worker.start();
    await expect.poll(async () => (await deliveries(m.messageId))[0]?.state, { timeout: 5000 }).toBe('delivered');
    await worker.stop();
    await bus.close();
    expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(1);
  });
});

describe('SSRF: webhooks on private addresses (§4.15 delivery)', () => {
  it('the address check refuses loopback, private, link-local and mapped forms; accepts public addresses', async () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
    ])
      expect(isPublicAddress(a), a).toBe(false);
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111']) expect(isPublicAddress(a), a).toBe(true);
    for (const url of ['http://127.0.0.1:9/x', 'http://10.0.0.1/x', 'http://localhost:9/x', 'http://[::1]:9/x'])
      await expect(checkWebhookUrl(url, false), url).rejects.toThrow(/private or loopback/);
    await expect(checkWebhookUrl('ftp://8.8.8.8/x', false)).rejects.toThrow(/http or https/);
    await expect(checkWebhookUrl('http://127.0.0.1:9/x', true)).resolves.toBeInstanceOf(URL);
  });

  it('without UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS a send to a webhook on 127.0.0.1, 10.x or localhost is refused (400) and nothing is recorded', async () => {
    const strict = createBusService({ db: t.database.db, allowPrivateWebhooks: false });
    const k = t.database.db.kysely;
    for (const url of [hookB.url, 'http://10.0.0.1/hook', hookB.url.replace('127.0.0.1', 'localhost')]) {
      await k
        .updateTable('agents')
        .set({ config: JSON.stringify({ underground: { webhookUrl: url } }) })
        .where('id', '=', agents.f)
        .execute();
      const m = await sign(message({ to: agents.f }));
      await expect(strict.send(m as never), url).rejects.toMatchObject({
        status: 400,
        message: expect.stringMatching(/private or loopback/),
      });
      expect(await deliveries(m.messageId)).toEqual([]);
    }
    await strict.close();
    // agent F back on a webhook the other tests may use
    await k
      .updateTable('agents')
      .set({ config: JSON.stringify({ underground: { webhookUrl: hookC.url } }) })
      .where('id', '=', agents.f)
      .execute();
  });

  it('the delivery connection checks the name again when it connects (DNS rebinding): localhost refused, allowed only with the setting', async () => {
    const url = hookB.url.replace('127.0.0.1', 'localhost');
    const strict = createGuardedDispatcher(false, 2000);
    const open = createGuardedDispatcher(true, 2000);
    try {
      const refused = await undiciFetch(url, { method: 'POST', body: '{}', dispatcher: strict }).then(
        () => null,
        (err: Error) => err,
      );
      expect(String((refused?.cause as Error | undefined)?.message ?? refused)).toMatch(/private or loopback/);
      const ok = await undiciFetch(url, {
        method: 'POST',
        body: '{"probe":true}',
        headers: { 'content-type': 'application/json' },
        dispatcher: open,
      });
      expect(ok.status).toBe(200);
    } finally {
      await Promise.all([strict.close(), open.close()]);
    }
  });

  it('through the route of a platform with the default settings: a webhook on 127.0.0.1, 10.x or a name resolving to loopback is a 400', async () => {
    const strictPlatform = await startTestPlatform(); // UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS unset: false
    try {
      expect(strictPlatform.config.UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS).toBe(false);
      const k = strictPlatform.database.db.kysely;
      const user = await k
        .insertInto('users')
        .values({ email: 'bus-strict@example.com', name: 'strict', referral_code: 'BUS-STRICT' })
        .returning('id')
        .executeTakeFirstOrThrow();
      // same agent ids as in the main platform (another database), so `message()` and `sign()` apply
      for (const [id, url] of [
        [agents.a, null],
        [agents.b, hookB.url],
        [agents.c, 'http://10.0.0.1/hook'],
        [agents.f, hookB.url.replace('127.0.0.1', 'localhost')],
      ] as const)
        await k
          .insertInto('agents')
          .values({
            id,
            user_id: user.id,
            name: 'n',
            subdomain: id,
            url: 'http://agent.test',
            config: JSON.stringify(url ? { underground: { webhookUrl: url } } : {}),
          })
          .execute();
      await k
        .insertInto('underground_agent_wallets')
        .values({
          agent_id: agents.a,
          user_id: user.id,
          address: keyA.address,
          private_key_enc: encryptSecret(TEST_SECRETS.walletEncryptionKey, 'unused'),
        })
        .execute();
      for (const to of [agents.b, agents.c, agents.f]) {
        const res = await strictPlatform.backend.inject({
          method: 'POST',
          url: '/api/underground/bus/send',
          payload: await sign(message({ to })),
        });
        expect(res.statusCode, to).toBe(400);
        expect(res.json().error).toMatch(/private or loopback/);
      }
      expect(await k.selectFrom('underground_bus_deliveries').select('id').execute()).toEqual([]);
    } finally {
      await strictPlatform.close();
    }
  });

  it('a job accepted while private targets were allowed is not delivered by a worker that refuses them (checked again at delivery)', async () => {
    const m = await sign(message());
    expect((await send(m)).statusCode).toBe(200);
    const strict = newBus(false);
    expect(await strict.processNext()).toBe(true);
    await strict.close();
    const [row] = await deliveries(m.messageId);
    expect(row).toMatchObject({ state: 'pending', attempts: 1 });
    expect(row?.last_error).toMatch(/private or loopback/);
    expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(0);
    await t.database.db.kysely
      .updateTable('underground_bus_deliveries')
      .set({ state: 'failed' })
      .where('message_id', '=', m.messageId)
      .execute();
  });
});

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

describe('wiring', () => {
  it("the backend's startWorkers runs the bus worker, which a send wakes at once", async () => {
    await t.platform.startWorkers();
    const m = await sign(message());
    expect((await send(m)).statusCode).toBe(200);
    await expect.poll(async () => (await deliveries(m.messageId))[0]?.state, { timeout: 3000, interval: 50 }).toBe('delivered');
    expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(1);
  });
});
