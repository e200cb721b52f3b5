/**
 * §4.11 `pay` against a local fake gateway: every field rule and text, the audit of every attempt
 * (refused and accepted rows, append-only for the request role: migration 180), and an HTTP 402
 * x402 challenge paid with the official @x402 packages, capped at the user's amount.
 */
import { sql } from 'kysely';
import { verifyTypedData } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BASE_USDC, FAKE_PAY_TO, type FakeX402Gateway, startFakeX402Gateway } from '../fakes/x402-gateway.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { type AgentOwner, userWithAgent } from './fixtures.ts';

// many sign-ups, and a daily cap above what the tests below spend (test/x402/x402-charges.test.ts tests the cap)
const MANY_SIGNUPS = { REGISTER_RATE_LIMIT: '100000', X402_USER_DAILY_CAP_USD: '100000' };
const PAYER_KEY = `0x${'42'.repeat(32)}` as const;
const EVM = '0x52908400098527886E0F7030069857D2E4169EE7';
const SOLANA = '7EcDhSYGxXyscszYEp35KHN8vvw3svAuLKTzXwCFLtV';

let fake: FakeX402Gateway;
let t: TestPlatform; // gateway and payer configured
let noPayer: TestPlatform; // gateway, no X402_PAYER_PRIVATE_KEY

beforeAll(async () => {
  fake = await startFakeX402Gateway();
  [t, noPayer] = await Promise.all([
    startTestPlatform({ ...MANY_SIGNUPS, X402_GATEWAY_URL: fake.url, X402_PAYER_PRIVATE_KEY: PAYER_KEY }),
    startTestPlatform({ ...MANY_SIGNUPS, X402_GATEWAY_URL: fake.url }),
  ]);
});
afterAll(async () => {
  await Promise.all([t?.close(), noPayer?.close()]);
  await fake?.close();
});

/** A signed-in user with an agent, whose wallet holds $1 000: `pay` is charged to it (docs/payments.md "x402"). */
async function funded(p: TestPlatform) {
  const u = await userWithAgent(p);
  const { address } = await p.platform.services.sessionWallet.create(u.id);
  await p.platform.services.ledger.credit({ address, amountMicros: 1_000 * 1_000_000, eventId: `fund:${u.id}`, source: 'test' });
  return { ...u, wallet: address };
}

const balance = (p: TestPlatform, address: string) => p.platform.services.ledger.balance(address);

/** `pay` for one of `u`'s agents (its own unless `fields` names another). */
const pay = (p: TestPlatform, fields: Record<string, unknown>, u: AgentOwner) =>
  p.web.inject({
    method: 'POST',
    url: '/api/x402',
    headers: { cookie: u.cookie },
    payload: { action: 'pay', agentId: u.agentId, ...fields },
  });
type AuditRow = {
  outcome: string;
  amount: string | null;
  currency: string | null;
  recipient: string | null;
  method: string | null;
  user_email: string;
  error: string | null;
  attempt_id: string;
  x402_paid: boolean;
  endpoint: string | null;
};
const auditOf = async (p: TestPlatform, userId: string) =>
  (await p.database.db.withUser(userId, (trx) => sql<AuditRow>`select * from x402_payments_audit order by id`.execute(trx))).rows;

describe('§4.11 pay: field rules, each refusal audited', () => {
  it('every refusal is 400 with its exact text and one `refused` audit row', async () => {
    fake.payMode = 'plain';
    const u = await funded(t);
    const cases: [Record<string, unknown>, string][] = [
      [{ agentId: undefined, amount: 1, recipient: EVM }, 'agentId required'],
      [{ recipient: EVM }, 'Invalid amount'],
      [{ amount: 0, recipient: EVM }, 'Invalid amount'],
      [{ amount: -5, recipient: EVM }, 'Invalid amount'],
      [{ amount: '5', recipient: EVM }, 'Invalid amount'],
      [{ amount: 0.0000001, recipient: EVM }, 'Invalid amount'],
      [{ amount: 100.01, recipient: EVM }, 'Amount exceeds $100 limit. Contact support for higher limits.'],
      [{ amount: 1e9, recipient: EVM }, 'Amount exceeds $100 limit. Contact support for higher limits.'],
      [{ amount: 5 }, 'Recipient required'],
      [{ amount: 5, recipient: '' }, 'Recipient required'],
      [{ amount: 5, recipient: '0x1234' }, 'Invalid recipient address'],
      [{ amount: 5, recipient: `0x${'g'.repeat(40)}` }, 'Invalid recipient address'],
      [{ amount: 5, recipient: `${EVM}00` }, 'Invalid recipient address'],
      [{ amount: 5, recipient: '0OIl'.repeat(10) }, 'Invalid recipient address'],
      [{ amount: 5, recipient: 'a'.repeat(31) }, 'Invalid recipient address'],
      [{ amount: 5, recipient: 7 }, 'Invalid recipient address'],
      [{ amount: 5, recipient: EVM, currency: '' }, 'Invalid currency'],
      [{ amount: 5, recipient: EVM, endpoint: '../admin' }, 'Invalid endpoint'],
      [{ amount: 5, recipient: EVM, method: 'x'.repeat(65) }, 'Invalid method'],
    ];
    for (const [fields, error] of cases) {
      const res = await pay(t, fields, u);
      expect(res.statusCode, JSON.stringify(fields)).toBe(400);
      expect(res.json(), JSON.stringify(fields)).toEqual({ error });
    }
    expect(fake.requests.filter((r) => r.path === '/pay')).toHaveLength(0);
    const rows = await auditOf(t, u.id);
    expect(rows.map((r) => [r.outcome, r.error])).toEqual(cases.map(([, error]) => ['refused', error]));
    expect(rows.every((r) => r.user_email === u.email)).toBe(true);
    expect(rows[6]).toMatchObject({ amount: '100.010000', currency: 'USDC', recipient: EVM, method: 'default' });
  });

  it('accepted: the gateway result; audit rows `attempted` then `accepted` (email, amount, currency, recipient, method)', async () => {
    fake.payMode = 'plain';
    const u = await funded(t);
    for (const [amount, recipient] of [
      [100, EVM],
      [0.01, SOLANA],
    ] as const) {
      const res = await pay(t, { amount, recipient, currency: 'EURC', method: 'fast', endpoint: 'weather' }, u);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        success: true,
        txId: 'tx_fake_1',
        received: { agentId: u.agentId, amount, currency: 'EURC', recipient, method: 'fast', endpoint: 'weather' },
      });
    }
    const rows = await auditOf(t, u.id);
    expect(rows.map((r) => [r.outcome, r.amount, r.currency, r.recipient, r.method, r.endpoint, r.user_email])).toEqual([
      ['attempted', '100.000000', 'EURC', EVM, 'fast', 'weather', u.email],
      ['accepted', '100.000000', 'EURC', EVM, 'fast', 'weather', u.email],
      ['attempted', '0.010000', 'EURC', SOLANA, 'fast', 'weather', u.email],
      ['accepted', '0.010000', 'EURC', SOLANA, 'fast', 'weather', u.email],
    ]);
    expect(rows[0]!.attempt_id).toBe(rows[1]!.attempt_id);
    expect(rows[1]!.attempt_id).not.toBe(rows[2]!.attempt_id);
    // the user paid both amounts from their wallet
    expect(await balance(t, u.wallet)).toBe((1_000 - 100 - 0.01) * 1_000_000);
  });

  it('a gateway failure is 500 x402 gateway error and audited as `failed`', async () => {
    const u = await funded(t);
    fake.modes = { pay: 'fail' };
    const res = await pay(t, { amount: 2, recipient: EVM }, u);
    fake.modes = {};
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: 'x402 gateway error' });
    expect((await auditOf(t, u.id)).map((r) => r.outcome)).toEqual(['attempted', 'failed']);
    expect(await balance(t, u.wallet)).toBe(1_000 * 1_000_000); // charged, then given back
  });
});

describe('§4.11 pay: bad bodies and concurrency', () => {
  it('a body that is not a JSON object is 400 with a JSON error, never 5xx', async () => {
    const u = await funded(t);
    for (const payload of ['[]', '"pay"', '{"action":', 'null']) {
      const res = await t.web.inject({
        method: 'POST',
        url: '/api/x402',
        headers: { cookie: u.cookie, 'content-type': 'application/json' },
        payload,
      });
      expect(res.statusCode, payload).toBe(400);
      expect(typeof res.json().error, payload).toBe('string');
    }
  });

  it('20 parallel payments: 20 gateway calls, each with its attempted and accepted rows', async () => {
    fake.payMode = 'plain';
    const u = await funded(t);
    const before = fake.requests.filter((r) => r.path === '/pay').length;
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => pay(t, { amount: i + 1, recipient: EVM }, u)));
    expect(results.map((r) => r.statusCode)).toEqual(Array(20).fill(200));
    expect(fake.requests.filter((r) => r.path === '/pay').length - before).toBe(20);
    const rows = await auditOf(t, u.id);
    expect(rows).toHaveLength(40);
    const byAttempt = new Map<string, string[]>();
    for (const r of rows) byAttempt.set(r.attempt_id, [...(byAttempt.get(r.attempt_id) ?? []), r.outcome]);
    expect([...byAttempt.values()].every((o) => o.join() === 'attempted,accepted')).toBe(true);
    expect(new Set(rows.map((r) => r.amount)).size).toBe(20);
    expect(await balance(t, u.wallet)).toBe((1_000 - 210) * 1_000_000); // 1 + 2 + … + 20
    expect(await t.platform.services.ledger.audit()).toEqual([]);
  });
});

describe('§4.11 audit is append-only for the request role (migration 180)', () => {
  it('the user cannot update, delete or truncate their rows, insert rows for someone else, or read another user’s', async () => {
    fake.payMode = 'plain';
    const u = await funded(t);
    const other = await funded(t);
    expect((await pay(t, { amount: 3, recipient: EVM }, u)).statusCode).toBe(200);
    const db = t.database.db;
    for (const statement of [
      sql`update x402_payments_audit set amount = 0`,
      sql`delete from x402_payments_audit`,
      sql`truncate x402_payments_audit`,
    ]) {
      await expect(db.withUser(u.id, (trx) => statement.execute(trx))).rejects.toThrow(/permission denied/);
    }
    await expect(
      db.withUser(u.id, (trx) =>
        sql`insert into x402_payments_audit (attempt_id, user_id, user_email, outcome) values (gen_random_uuid(), ${other.id}, 'x@example.com', 'accepted')`.execute(
          trx,
        ),
      ),
    ).rejects.toThrow(/row-level security/);
    expect(await auditOf(t, other.id)).toEqual([]);
    const rows = await auditOf(t, u.id);
    expect(rows.map((r) => [r.outcome, r.amount])).toEqual([
      ['attempted', '3.000000'],
      ['accepted', '3.000000'],
    ]);
  });
});

describe('§4.11 pay: an HTTP 402 x402 challenge', () => {
  it('is paid with the official x402 client (EIP-3009 signature by the payer), never above the amount', async () => {
    fake.payMode = 'x402';
    fake.priceAtomic = '1500000'; // 1.5 USDC
    fake.payments.length = 0;
    const u = await funded(t);
    const res = await pay(t, { amount: 2, recipient: EVM }, u);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ success: true, txId: 'tx_fake_1' });
    expect(fake.payments).toHaveLength(1);
    const payment = fake.payments[0] as {
      x402Version: number;
      payload: { signature: `0x${string}`; authorization: Record<string, string> };
    };
    const auth = payment.payload.authorization;
    const payer = privateKeyToAccount(PAYER_KEY).address;
    expect(payment.x402Version).toBe(2);
    expect(auth).toMatchObject({ from: payer, to: FAKE_PAY_TO, value: '1500000' });
    const valid = await verifyTypedData({
      address: payer,
      domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: BASE_USDC },
      types: {
        TransferWithAuthorization: [
          { name: 'from', type: 'address' },
          { name: 'to', type: 'address' },
          { name: 'value', type: 'uint256' },
          { name: 'validAfter', type: 'uint256' },
          { name: 'validBefore', type: 'uint256' },
          { name: 'nonce', type: 'bytes32' },
        ],
      },
      primaryType: 'TransferWithAuthorization',
      message: {
        from: auth.from as `0x${string}`,
        to: auth.to as `0x${string}`,
        value: BigInt(auth.value!),
        validAfter: BigInt(auth.validAfter!),
        validBefore: BigInt(auth.validBefore!),
        nonce: auth.nonce as `0x${string}`,
      },
      signature: payment.payload.signature,
    });
    expect(valid).toBe(true);
    const rows = await auditOf(t, u.id);
    expect(rows.map((r) => [r.outcome, r.x402_paid])).toEqual([
      ['attempted', false],
      ['accepted', true],
    ]);

    // the gateway asks 1.5 USDC, the user allowed 1: nothing is signed, 502, audited as failed
    const capped = await pay(t, { amount: 1, recipient: EVM }, u);
    expect(capped.statusCode).toBe(502);
    expect(capped.json().error).toMatch(/^x402 payment failed: /);
    expect(fake.payments).toHaveLength(1);
    expect((await auditOf(t, u.id)).slice(2).map((r) => r.outcome)).toEqual(['attempted', 'failed']);
    // the paid call stays charged ($2), the one nothing was signed for is given back
    expect(await balance(t, u.wallet)).toBe(998 * 1_000_000);
    fake.payMode = 'plain';
  });

  it('without X402_PAYER_PRIVATE_KEY the challenge is refused with 502 and audited', async () => {
    fake.payMode = 'x402';
    const u = await funded(noPayer);
    const res = await pay(noPayer, { amount: 5, recipient: EVM }, u);
    fake.payMode = 'plain';
    expect(res.statusCode).toBe(502);
    expect(res.json()).toEqual({ error: 'x402 payment failed: The x402 gateway asked for a payment and no payer is configured' });
    expect((await auditOf(noPayer, u.id)).map((r) => [r.outcome, r.error])).toEqual([
      ['attempted', null],
      ['failed', 'The x402 gateway asked for a payment and no payer is configured'],
    ]);
    expect(await balance(noPayer, u.wallet)).toBe(1_000 * 1_000_000);
  });
});
