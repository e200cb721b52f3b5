/**
 * §4.4 card top-ups through the `stripe` SDK against a local Stripe-shaped server: the checkout
 * (amounts, address check, redirect URLs, metadata), the signed webhook that credits the ledger
 * once per event (20 parallel deliveries credit once), ignored events, bad signatures, and a
 * credited top-up spent through a payment session (§4.8).
 */
import { randomBytes } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientKey, GATEWAY_CHECKOUTS_PER_CALLER } from '../../src/domains/payments/card/top-up.service.ts';
import { openSessionTypes, sessionKeyHash } from '../../src/domains/payments/sessions/receipts.rules.ts';
import { type FakeStripe, startFakeStripe } from '../fakes/stripe-api.ts';
import { startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

let stripe: FakeStripe;
let t: TestPlatform;
beforeAll(async () => {
  stripe = await startFakeStripe();
  t = await startTestPlatform({
    STRIPE_SECRET_KEY: stripe.secretKey,
    STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
    STRIPE_API_URL: stripe.url,
    PUBLIC_URL: 'https://platform.example.com',
  });
});
afterAll(async () => {
  if (t) expect(await t.platform.services.ledger.audit()).toEqual([]);
  await t?.close();
  await stripe?.close();
});

const address = () => `0x${randomBytes(20).toString('hex')}`;
const topUp = (query: string) => t.web.inject({ method: 'GET', url: `/api/wallet/top-up${query}` });
const deliver = (e: { body: string; signature: string }, signature: string | null = e.signature) =>
  t.web.inject({
    method: 'POST',
    url: '/api/wallet/top-up',
    headers: { 'content-type': 'application/json', ...(signature === null ? {} : { 'payment-signature': signature }) },
    payload: e.body,
  });
const completed = (metadata: Record<string, string>, extra: Record<string, unknown> = {}) =>
  stripe.signedEvent('checkout.session.completed', {
    id: `cs_test_${randomBytes(6).toString('hex')}`,
    object: 'checkout.session',
    payment_status: 'paid',
    amount_total: Number(metadata.amountCents),
    metadata,
    ...extra,
  });

describe('GET /api/wallet/top-up', () => {
  it('creates a checkout for the amount with the §4.4 redirect URLs and metadata; default 1000 cents', async () => {
    const a = address();
    const res = await topUp(`?amount=2500&address=${a}`);
    expect(res.statusCode).toBe(200);
    const { url, sessionId } = res.json();
    const s = stripe.sessions.find((x) => x.id === sessionId)!;
    expect(url).toBe(s.url);
    expect(s).toMatchObject({
      mode: 'payment',
      amount_total: 2500,
      success_url: 'https://platform.example.com/dashboard/wallet?top_up=success',
      cancel_url: 'https://platform.example.com/dashboard/wallet?top_up=cancelled',
      metadata: { type: 'wallet_top_up', walletAddress: a, amountCents: '2500' },
    });
    const dflt = await topUp(`?address=${a}`);
    expect(stripe.sessions.find((x) => x.id === dflt.json().sessionId)!.amount_total).toBe(1000);
  });

  it('400 for an amount outside 500/1000/2500/5000 or a bad address; nothing is created', async () => {
    const before = stripe.sessions.length;
    for (const q of [
      `?amount=700&address=${address()}`,
      `?amount=abc&address=${address()}`,
      `?amount=-500&address=${address()}`,
      '?amount=1000',
      '?amount=1000&address=0x123',
      `?amount=1000&address=${address()}00`,
    ]) {
      const res = await topUp(q);
      expect(res.statusCode, q).toBe(400);
      expect(typeof res.json().error).toBe('string');
    }
    expect(stripe.sessions.length).toBe(before);
  });

  it('500 with a JSON error when the processor fails or is not configured', async () => {
    stripe.failing = true;
    try {
      const res = await topUp(`?amount=500&address=${address()}`);
      expect(res.statusCode).toBe(500);
      expect(res.json().error).toMatch(/checkout/i);
    } finally {
      stripe.failing = false;
    }
    await withTestPlatform({}, async (off) => {
      const res = await off.web.inject({ method: 'GET', url: `/api/wallet/top-up?amount=500&address=${address()}` });
      expect(res.statusCode).toBe(500);
      expect(res.json().error).toMatch(/not configured/);
    });
  });
});

describe('POST /api/wallet/top-up (processor webhook)', () => {
  it('credits the wallet once per event: 20 parallel deliveries of one event credit once', async () => {
    const a = address();
    const e = completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '1000' });
    const results = await Promise.all(Array.from({ length: 20 }, () => deliver(e)));
    expect(results.every((r) => r.statusCode === 200)).toBe(true);
    expect(results.filter((r) => r.json().credited === true)).toHaveLength(1);
    expect(await t.platform.services.ledger.balance(a)).toBe(10_000_000); // $10.00 in micro-USD
    // and later replays change nothing either
    expect((await deliver(e)).json()).toMatchObject({ received: true, credited: false });
    expect(await t.platform.services.ledger.balance(a)).toBe(10_000_000);
  });

  it('credits once per checkout session: two differently-identified events for one session credit once', async () => {
    const a = address();
    const session = `cs_test_${randomBytes(6).toString('hex')}`;
    const first = completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '1000' }, { id: session });
    const second = completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '1000' }, { id: session });
    expect(first.id).not.toBe(second.id);
    const results = await Promise.all([deliver(first), deliver(second), deliver(first), deliver(second)]);
    expect(results.map((r) => r.statusCode)).toEqual([200, 200, 200, 200]);
    expect(results.filter((r) => r.json().credited === true)).toHaveLength(1);
    expect(await t.platform.services.ledger.balance(a)).toBe(10_000_000);
    // another session for the same wallet is another payment
    expect((await deliver(completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '500' }))).json().credited).toBe(true);
    expect(await t.platform.services.ledger.balance(a)).toBe(15_000_000);
  });

  it('an event credited before credits were keyed by checkout session is not credited again', async () => {
    const a = address();
    const e = completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '1000' });
    // what an earlier version recorded for this delivery: the credit under the event id
    await t.platform.services.ledger.credit({ address: a, amountMicros: 10_000_000, eventId: e.id, source: 'card_top_up' });
    expect((await deliver(e)).json()).toMatchObject({ received: true, credited: false });
    expect(await t.platform.services.ledger.balance(a)).toBe(10_000_000);
  });

  it('a completed checkout without a session id is acknowledged and not credited', async () => {
    const a = address();
    const e = completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '1000' }, { id: undefined });
    expect((await deliver(e)).json()).toMatchObject({ received: true, ignored: expect.any(String) });
    expect(await t.platform.services.ledger.balance(a)).toBe(0);
  });

  it('400 for a missing or bad signature (wrong secret, tampered body); nothing credited', async () => {
    const a = address();
    const e = completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '5000' });
    expect((await deliver(e, null)).statusCode).toBe(400);
    expect((await deliver(e, 't=1,v1=deadbeef')).statusCode).toBe(400);
    const forged = completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '5000' });
    expect(
      (await deliver({ body: forged.body, signature: stripe.signedEvent('x', {}, { secret: 'whsec_wrong' }).signature })).statusCode,
    ).toBe(400);
    expect((await deliver({ body: e.body.replace('5000', '500000'), signature: e.signature })).statusCode).toBe(400);
    expect(await t.platform.services.ledger.balance(a)).toBe(0);
  });

  it('acknowledges (200) and ignores other events, other checkouts, unpaid ones and unexpected metadata', async () => {
    const a = address();
    const cases = [
      stripe.signedEvent('customer.created', { id: 'cus_1', object: 'customer' }),
      completed({ type: 'subscription', walletAddress: a, amountCents: '1000' }),
      completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '1000' }, { payment_status: 'unpaid' }),
      completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '999999' }),
      completed({ type: 'wallet_top_up', walletAddress: 'not-an-address', amountCents: '1000' }),
      completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '1000' }, { amount_total: 500 }),
    ];
    for (const e of cases) {
      const res = await deliver(e);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ received: true, ignored: expect.any(String) });
    }
    expect(await t.platform.services.ledger.balance(a)).toBe(0);
  });

  it('a credited top-up is spendable by that wallet’s payment sessions', async () => {
    const pk = generatePrivateKey();
    const account = privateKeyToAccount(pk);
    const a = account.address.toLowerCase();
    expect((await deliver(completed({ type: 'wallet_top_up', walletAddress: a, amountCents: '500' }))).json().credited).toBe(true);
    const deadline = Math.floor(Date.now() / 1000) + 600;
    const salt = `0x${randomBytes(32).toString('hex')}` as const;
    const keyHash = sessionKeyHash(`ps_${randomBytes(32).toString('base64url')}`);
    const { domain } = (await t.web.inject({ method: 'GET', url: '/api/payments/receipt-signer' })).json();
    const signature = await account.signTypedData({
      domain,
      types: openSessionTypes,
      primaryType: 'OpenSession',
      message: { wallet: account.address, deposit: 5_000_000n, deadline: BigInt(deadline), salt, sessionKeyHash: keyHash },
    });
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/wallet/sessions',
      payload: { address: account.address, deposit: '5', signature, deadline, salt, sessionKeyHash: keyHash },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(Number(res.json().remaining)).toBe(5);
    expect(await t.platform.services.ledger.balance(a)).toBe(0);
  });
});

describe('the v1 gateway’s card method (§4.8)', () => {
  it('a 402 carries a real checkout URL for the plugin price, created on the processor', async () => {
    const before = stripe.sessions.length;
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/v1/gateway',
      headers: { 'content-type': 'application/json' },
      payload: { plugin: 'generate-text', prompt: 'hi' },
    });
    expect(res.statusCode).toBe(402);
    const body = res.json();
    expect(body.error).toBe('payment_required');
    expect(stripe.sessions.length).toBe(before + 1);
    expect(body.stripe.checkoutUrl).toBe(stripe.sessions.at(-1)!.url);
    expect(body.stripe).toMatchObject({ amount: 1, currency: 'usd' });
    // unpaid calls keep answering 402 with the same link: no processor checkout per request
    const again = await Promise.all(
      Array.from({ length: 5 }, () =>
        t.web.inject({
          method: 'POST',
          url: '/api/v1/gateway',
          headers: { 'content-type': 'application/json' },
          payload: { plugin: 'generate-text', prompt: 'hi' },
        }),
      ),
    );
    expect(again.map((r) => r.json().stripe.checkoutUrl)).toEqual(Array(5).fill(body.stripe.checkoutUrl));
    expect(stripe.sessions.length).toBe(before + 1);
  });

  it('anonymous 402s cannot make a processor checkout per X-Wallet-Address: a per-client limit, same 402 body', async () => {
    await withTestPlatform(
      {
        STRIPE_SECRET_KEY: stripe.secretKey,
        STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
        STRIPE_API_URL: stripe.url,
        PUBLIC_URL: 'https://platform.example.com',
      },
      async (p) => {
        const call = (wallet: string, remoteAddress: string) =>
          p.web.inject({
            method: 'POST',
            url: '/api/v1/gateway',
            remoteAddress,
            headers: { 'content-type': 'application/json', 'x-wallet-address': wallet },
            payload: { plugin: 'generate-text', prompt: 'hi' },
          });
        const before = stripe.sessions.length;
        const burst = [];
        for (let i = 0; i < 30; i++) burst.push(await call(address(), '203.0.113.7'));
        // one client: a few checkouts, not one per request
        expect(GATEWAY_CHECKOUTS_PER_CALLER).toBeLessThan(10);
        expect(stripe.sessions.length - before).toBe(GATEWAY_CHECKOUTS_PER_CALLER);
        for (const r of burst) {
          expect(r.statusCode).toBe(402);
          // §4.8's body shape either way; past the limit the link is null
          expect(r.json()).toMatchObject({
            error: 'payment_required',
            message: expect.any(String),
            stripe: { checkoutUrl: expect.toSatisfy((u: unknown) => u === null || typeof u === 'string'), amount: 1, currency: 'usd' },
          });
        }
        expect(burst.at(-1)!.json().stripe.checkoutUrl).toBeNull();
        // addresses of one IPv6 /64 are one client
        const v6 = stripe.sessions.length;
        for (let i = 0; i < 10; i++) await call(address(), `2001:db8:1:2::${(i + 1).toString(16)}`);
        expect(stripe.sessions.length - v6).toBe(GATEWAY_CHECKOUTS_PER_CALLER);
        // another client still gets a real link
        const other = await call(address(), '198.51.100.20');
        expect(other.json().stripe.checkoutUrl).toBe(stripe.sessions.at(-1)!.url);
      },
    );
  });

  it('limit keys: IPv4 (also IPv4-mapped) as is, IPv6 by its /64', () => {
    expect(clientKey('203.0.113.7')).toBe('203.0.113.7');
    expect(clientKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(clientKey('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(clientKey('2001:0db8:0001:0002:ffff:0:0:9')).toBe('2001:db8:1:2::/64');
    expect(clientKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(clientKey('::1')).toBe('0:0:0:0::/64');
    expect(clientKey(undefined)).toBe('unknown');
  });
});
