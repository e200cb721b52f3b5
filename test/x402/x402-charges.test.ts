/**
 * §4.11 `pay` is charged to the user (docs/payments.md "x402"): the amount is debited from their
 * wallet balance through the ledger before the gateway is called, refused with 402 when short
 * (the audit row says `refused` and why, the gateway is never called), given back when the call
 * fails, and kept within X402_USER_DAILY_CAP_USD per UTC day even by parallel calls (429 past it).
 */
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeX402Gateway, startFakeX402Gateway } from '../fakes/x402-gateway.ts';
import { startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';
import { type AgentOwner, userWithAgent } from './fixtures.ts';

const EVM = '0x52908400098527886E0F7030069857D2E4169EE7';
let fake: FakeX402Gateway;
let t: TestPlatform;

beforeAll(async () => {
  fake = await startFakeX402Gateway();
  t = await startTestPlatform({ REGISTER_RATE_LIMIT: '1000', X402_GATEWAY_URL: fake.url, X402_USER_DAILY_CAP_USD: '10' });
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});

async function user(fundUsd: number | null) {
  const u = await userWithAgent(t);
  if (fundUsd === null) return { ...u, wallet: '' };
  const { address } = await t.platform.services.sessionWallet.create(u.id);
  await t.platform.services.ledger.credit({ address, amountMicros: fundUsd * 1_000_000, eventId: `fund:${u.id}`, source: 'test' });
  return { ...u, wallet: address };
}
const pay = (u: AgentOwner, amount: number) =>
  t.web.inject({
    method: 'POST',
    url: '/api/x402',
    headers: { cookie: u.cookie },
    payload: { action: 'pay', agentId: u.agentId, amount, recipient: EVM },
  });
const payCalls = () => fake.requests.filter((r) => r.path === '/pay').length;
const audit = async (userId: string) =>
  (
    await t.database.db.withUser(userId, (trx) =>
      sql<{ outcome: string; error: string | null }>`select outcome, error from x402_payments_audit order by id`.execute(trx),
    )
  ).rows.map((r) => [r.outcome, r.error]);
const balance = (address: string) => t.platform.services.ledger.balance(address);

describe('§4.11 pay is charged to the user', () => {
  it('debits the amount from the wallet; the journal says x402 payment', async () => {
    const u = await user(5);
    expect((await pay(u, 1.25)).statusCode).toBe(200);
    expect(await balance(u.wallet)).toBe(3_750_000);
    const [row] = await t.platform.services.ledger.journal(u.wallet, { limit: 1 });
    expect(row).toMatchObject({ amountMicros: -1_250_000, description: 'x402 payment' });
  });

  it('402 insufficient_balance when the balance is short: audited as refused, the gateway not called', async () => {
    const u = await user(1);
    const calls = payCalls();
    const res = await pay(u, 1.5);
    expect(res.statusCode).toBe(402);
    expect(res.json()).toEqual({
      error: 'insufficient_balance',
      message: 'This payment needs 1.50 USD; your wallet balance is 1.00',
      balance: '1.00',
      cost: '1.50',
    });
    expect(payCalls()).toBe(calls);
    expect(await balance(u.wallet)).toBe(1_000_000);
    expect(await audit(u.id)).toEqual([['refused', 'insufficient_balance: balance 1.00, cost 1.50']]);
    // a user without a wallet has nothing to pay with
    const none = await user(null);
    const r2 = await pay(none, 1);
    expect(r2.statusCode).toBe(402);
    expect(r2.json()).toMatchObject({ balance: '0', cost: '1.00' });
  });

  it('a failed gateway call is given back once; the refund shows in the journal', async () => {
    const u = await user(5);
    fake.modes = { pay: 'fail' };
    const res = await pay(u, 2);
    fake.modes = {};
    expect(res.statusCode).toBe(500);
    expect(await balance(u.wallet)).toBe(5_000_000);
    const rows = await t.platform.services.ledger.journal(u.wallet, { limit: 2 });
    expect(rows.map((r) => [r.amountMicros, r.description])).toEqual([
      [2_000_000, 'Refund: the x402 payment did not go through'],
      [-2_000_000, 'x402 payment'],
    ]);
    expect((await audit(u.id)).map(([o]) => o)).toEqual(['attempted', 'failed']);
  });

  it('20 parallel $1 payments with a $10 daily cap: exactly 10 go through, the rest 429 and audited as refused', async () => {
    fake.payMode = 'plain';
    const u = await user(100);
    const calls = payCalls();
    const results = await Promise.all(Array.from({ length: 20 }, () => pay(u, 1)));
    const codes = results.map((r) => r.statusCode);
    expect(codes.filter((c) => c === 200)).toHaveLength(10);
    expect(codes.filter((c) => c === 429)).toHaveLength(10);
    expect(results.find((r) => r.statusCode === 429)!.json()).toMatchObject({
      error: expect.stringMatching(/^Daily x402 limit reached: 10\.00 of 10\.00 USD spent today \(UTC\)/),
      dailyCap: '10.00',
      spentToday: '10.00',
    });
    expect(payCalls() - calls).toBe(10);
    expect(await balance(u.wallet)).toBe(90_000_000);
    const outcomes = (await audit(u.id)).map(([o]) => o);
    expect(outcomes.filter((o) => o === 'accepted')).toHaveLength(10);
    expect(outcomes.filter((o) => o === 'refused')).toHaveLength(10);
    expect(await t.platform.services.ledger.audit()).toEqual([]);
  });

  it('refunds count against the cap no more: a failed call leaves room for another', async () => {
    const u = await user(100);
    expect((await pay(u, 9)).statusCode).toBe(200);
    fake.modes = { pay: 'fail' };
    expect((await pay(u, 1)).statusCode).toBe(500);
    fake.modes = {};
    expect((await pay(u, 1)).statusCode).toBe(200);
    expect((await pay(u, 0.01)).statusCode).toBe(429);
    expect(await balance(u.wallet)).toBe(90_000_000);
  });

  it('a call the platform signed an x402 payment for stays charged when the gateway then fails', async () => {
    // in front of the fake gateway: the signed retry (header payment-signature) is answered 500
    // after the fake has seen it, as a gateway that took the payment and then broke would
    const proxy = createServer((req, res) => {
      const target = new URL(req.url ?? '/', fake.url);
      const up = httpRequest(target, { method: req.method, headers: req.headers }, (r) => {
        if (req.headers['payment-signature']) {
          r.resume();
          res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"broke after payment"}');
        } else {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        }
      });
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    fake.payMode = 'x402';
    fake.priceAtomic = '1500000';
    try {
      const env = {
        REGISTER_RATE_LIMIT: '1000',
        X402_GATEWAY_URL: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
        X402_PAYER_PRIVATE_KEY: `0x${'42'.repeat(32)}`,
      };
      await withTestPlatform(env, async (p) => {
        const u = await userWithAgent(p);
        const { address } = await p.platform.services.sessionWallet.create(u.id);
        await p.platform.services.ledger.credit({ address, amountMicros: 5_000_000, eventId: `fund:${u.id}`, source: 'test' });
        const res = await p.web.inject({
          method: 'POST',
          url: '/api/x402',
          headers: { cookie: u.cookie },
          payload: { action: 'pay', agentId: u.agentId, amount: 2, recipient: EVM },
        });
        expect(res.statusCode).toBe(500);
        expect(await p.platform.services.ledger.balance(address)).toBe(3_000_000); // not given back
        const rows = await p.database.db.withUser(u.id, (trx) =>
          sql<{ outcome: string; x402_paid: boolean }>`select outcome, x402_paid from x402_payments_audit order by id`.execute(trx),
        );
        expect(rows.rows.map((r) => [r.outcome, r.x402_paid])).toEqual([
          ['attempted', false],
          ['failed', true],
        ]);
      });
    } finally {
      fake.payMode = 'plain';
      await new Promise<void>((r) => proxy.close(() => r()));
    }
  });
});
