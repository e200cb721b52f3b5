/**
 * §4.8 session billing through POST /api/v1/gateway, §4.18 POST /api/wallet/sessions
 * (docs/payments.md): opening with proof of the address, debits by voucher with signed receipts,
 * every 402 code, close and expiry, and the 100-parallel proof.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { type Hex, recoverTypedDataAddress } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createReceiptSigner,
  openSessionTypes,
  paymentDomain,
  receiptTypes,
  sessionKeyHash,
  sessionRef,
} from '../../src/domains/payments/sessions/receipts.rules.ts';
import { createPaymentSessionsService } from '../../src/domains/payments/sessions/sessions.service.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

let router: FakeOpenAi;
let t: TestPlatform;
const CHAIN_ID = 4217;
let eventCounter = 0;

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: 'router-key', quiet: true });
  t = await startTestPlatform({ ROUTER_API_KEY: 'router-key', ROUTER_BASE_URL: router.url });
});
afterAll(async () => {
  if (t) expect(await t.platform.services.ledger.audit()).toEqual([]);
  await t?.close();
  await router?.close();
});
beforeEach(() => router.reset());

async function fund(address: string, usdMicros: number) {
  await t.platform.services.ledger.credit({ address, amountMicros: usdMicros, eventId: `evt_test_${eventCounter++}`, source: 'test' });
}

/** The deployment's payment domain, as a client reads it. */
async function domainOf(p: TestPlatform = t) {
  return (await p.web.inject({ method: 'GET', url: '/api/payments/receipt-signer' })).json().domain as ReturnType<typeof paymentDomain>;
}

/**
 * What a wallet sends to open a session without signing in (docs/payments.md): it chooses the
 * session id, keeps it, and signs only its hash. `sessionId` is returned beside the body.
 */
async function signedOpen(pk: Hex, deposit: string, overrides: Record<string, unknown> = {}, p: TestPlatform = t) {
  const account = privateKeyToAccount(pk);
  const deadline = Math.floor(Date.now() / 1000) + 600;
  const salt = `0x${randomBytes(32).toString('hex')}` as Hex;
  const sessionId = `ps_${randomBytes(32).toString('base64url')}`;
  const [whole, frac = ''] = deposit.split('.');
  const depositMicros = BigInt(whole!) * 1_000_000n + BigInt(frac.padEnd(6, '0'));
  const signature = await account.signTypedData({
    domain: await domainOf(p),
    types: openSessionTypes,
    primaryType: 'OpenSession',
    message: {
      wallet: account.address,
      deposit: depositMicros,
      deadline: BigInt(deadline),
      salt,
      sessionKeyHash: sessionKeyHash(sessionId),
    },
  });
  const body = { address: account.address, deposit, signature, deadline, salt, sessionKeyHash: sessionKeyHash(sessionId), ...overrides };
  return { body, sessionId };
}

async function openSession(pk: Hex, deposit: string) {
  const { body, sessionId } = await signedOpen(pk, deposit);
  const res = await t.web.inject({ method: 'POST', url: '/api/wallet/sessions', payload: body });
  expect(res.statusCode, res.body).toBe(201);
  return { ...(res.json() as { address: string; remaining: string; status: string }), sessionId };
}

const gw = (headers: Record<string, string>, payload: object = { plugin: 'generate-text', prompt: 'hello' }) =>
  t.web.inject({ method: 'POST', url: '/api/v1/gateway', headers: { 'content-type': 'application/json', ...headers }, payload });

const sessionHeaders = (s: { sessionId: string; address: string }) => ({
  'x-payment-method': 'session',
  'x-session-id': s.sessionId,
  'x-wallet-address': s.address,
});

describe('opening a session', () => {
  it('moves the deposit from the wallet balance into the session (EIP-712 proof)', async () => {
    const pk = generatePrivateKey();
    const address = privateKeyToAccount(pk).address.toLowerCase();
    await fund(address, 1_000_000);
    const s = await openSession(pk, '0.25');
    expect(s).toMatchObject({ address, remaining: '0.25', status: 'active' });
    expect(await t.platform.services.ledger.balance(address)).toBe(750_000);
    // only the hash of the bearer id is stored
    const rows = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM payment_sessions WHERE token_hash = sha256(convert_to(${s.sessionId}, 'UTF8'))`.execute(
      t.database.db.kysely,
    );
    expect(rows.rows[0]!.n).toBe(1);
    const dump = await sql<{ t: string }>`SELECT row_to_json(p)::text AS t FROM payment_sessions p`.execute(t.database.db.kysely);
    expect(dump.rows.map((r) => r.t).join()).not.toContain(s.sessionId.slice(3));
  });

  it('a signed open answers without a bearer id: the session is reachable only with the id its signer chose (docs/security.md N11)', async () => {
    const pk = generatePrivateKey();
    await fund(privateKeyToAccount(pk).address.toLowerCase(), 1_000_000);
    const { body, sessionId } = await signedOpen(pk, '0.10');
    // someone else submits the signature (a relay, a log reader)
    const res = await t.web.inject({ method: 'POST', url: '/api/wallet/sessions', payload: body });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().sessionId).toBeUndefined();
    expect(res.body).not.toMatch(/ps_/);
    // the signer holds the id
    const view = await t.web.inject({ method: 'GET', url: '/api/wallet/sessions', headers: { 'x-session-id': sessionId } });
    expect(view.json()).toMatchObject({ remaining: '0.10', status: 'active' });
    expect((await gw(sessionHeaders({ sessionId, address: body.address }))).statusCode).toBe(200);
    // the signer's own later submission is refused, the session stays theirs
    const again = await t.web.inject({ method: 'POST', url: '/api/wallet/sessions', payload: body });
    expect([again.statusCode, again.json().error]).toEqual([400, 'Signature already used']);
  });

  it('a signature made for another deployment is refused here (docs/security.md N11)', async () => {
    const pk = generatePrivateKey();
    const address = privateKeyToAccount(pk).address.toLowerCase();
    await fund(address, 1_000_000);
    await withTestPlatform(
      { ROUTER_API_KEY: 'router-key', ROUTER_BASE_URL: router.url, PAYMENT_RECEIPT_KEY: generatePrivateKey() },
      async (other) => {
        await other.platform.services.ledger.credit({ address, amountMicros: 1_000_000, eventId: 'evt_other_deployment', source: 'test' });
        expect((await domainOf(other)).verifyingContract).not.toBe((await domainOf()).verifyingContract);
        const forOther = await signedOpen(pk, '0.10', {}, other);
        const here = await t.web.inject({ method: 'POST', url: '/api/wallet/sessions', payload: forOther.body });
        expect([here.statusCode, here.json().error]).toEqual([403, 'Signature is not by this address']);
        expect(await t.platform.services.ledger.balance(address)).toBe(1_000_000);
        const there = await other.web.inject({ method: 'POST', url: '/api/wallet/sessions', payload: forOther.body });
        expect(there.statusCode, there.body).toBe(201);
      },
    );
  });

  it("the signed-in user's own session wallet is proof too; another address is 403", async () => {
    const { cookie } = await signUp(t.web);
    const created = await t.web.inject({ method: 'POST', url: '/api/wallet', headers: { cookie }, payload: { action: 'create' } });
    const address = (created.json() as { address: string }).address.toLowerCase();
    await fund(address, 500_000);
    const ok = await t.web.inject({ method: 'POST', url: '/api/wallet/sessions', headers: { cookie }, payload: { address, deposit: 0.1 } });
    expect(ok.statusCode, ok.body).toBe(201);
    const other = `0x${'ab'.repeat(20)}`;
    await fund(other, 500_000);
    const no = await t.web.inject({
      method: 'POST',
      url: '/api/wallet/sessions',
      headers: { cookie },
      payload: { address: other, deposit: 0.1 },
    });
    expect(no.statusCode).toBe(403);
    expect(await t.platform.services.ledger.balance(other)).toBe(500_000);
  });

  it('bad input: 4xx with a JSON error and nothing changed', async () => {
    const pk = generatePrivateKey();
    const address = privateKeyToAccount(pk).address.toLowerCase();
    await fund(address, 100_000);
    const cases: [object, number][] = [
      [{ address: 'nope', deposit: '0.01' }, 400],
      [{ address, deposit: '-1' }, 400],
      [{ address, deposit: '0' }, 400],
      [{ address, deposit: '0.0000001' }, 400],
      [{ address, deposit: 'lots' }, 400],
      [{ address, deposit: '0.01' }, 401], // neither signed in nor signed
      [(await signedOpen(pk, '0.01', { deposit: '0.02' })).body, 403], // signature over another deposit
      [(await signedOpen(pk, '0.01', { sessionKeyHash: `0x${'ab'.repeat(32)}` })).body, 403], // over another session key
      [(await signedOpen(pk, '0.01', { sessionKeyHash: undefined })).body, 400],
      [(await signedOpen(pk, '0.01', { signature: '0x1234' })).body, 400],
      [(await signedOpen(pk, '0.01', { deadline: 1 })).body, 400],
      [(await signedOpen(pk, '5.00')).body, 402], // more than the balance
    ];
    for (const [payload, status] of cases) {
      const res = await t.web.inject({ method: 'POST', url: '/api/wallet/sessions', payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(status);
      expect(typeof res.json().error).toBe('string');
    }
    const notJson = await t.web.inject({
      method: 'POST',
      url: '/api/wallet/sessions',
      headers: { 'content-type': 'application/json' },
      payload: '[1',
    });
    expect(notJson.statusCode).toBe(400);
    expect(await t.platform.services.ledger.balance(address)).toBe(100_000);
    const n = await sql<{ n: number }>`SELECT count(*)::int AS n FROM payment_sessions WHERE address = ${address}`.execute(
      t.database.db.kysely,
    );
    expect(n.rows[0]!.n).toBe(0);
  });

  it('a signed authorisation opens at most one session', async () => {
    const pk = generatePrivateKey();
    await fund(privateKeyToAccount(pk).address.toLowerCase(), 1_000_000);
    const { body: payload } = await signedOpen(pk, '0.10');
    const results = await Promise.all(
      Array.from({ length: 5 }, () => t.web.inject({ method: 'POST', url: '/api/wallet/sessions', payload })),
    );
    expect(results.filter((r) => r.statusCode === 201)).toHaveLength(1);
    expect(results.filter((r) => r.statusCode === 400)).toHaveLength(4);
  });
});

describe('gateway session billing', () => {
  it('100 parallel calls on a session funded for exactly 10: 10 succeed, 90 insufficient_balance, remaining 0, 10 receipts', async () => {
    const pk = generatePrivateKey();
    await fund(privateKeyToAccount(pk).address.toLowerCase(), 100_000);
    const s = await openSession(pk, '0.10'); // generate-text costs $0.01
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => gw(sessionHeaders(s), { plugin: 'generate-text', prompt: `call ${i}` })),
    );
    const ok = results.filter((r) => r.statusCode === 200);
    const short = results.filter((r) => r.statusCode === 402);
    expect(ok).toHaveLength(10);
    expect(short).toHaveLength(90);
    for (const r of short) expect(r.json()).toMatchObject({ error: 'insufficient_balance', session: { remaining: '0.00', cost: '0.01' } });
    const receipts = new Set(ok.map((r) => r.headers['payment-receipt']));
    expect(receipts.size).toBe(10);
    for (const r of ok) {
      expect(r.headers['payment-receipt']).toMatch(new RegExp(`^session:${s.sessionId}:[0-9a-f]{32}$`));
      expect(r.headers['x-plugin-id']).toBe('generate-text');
      expect(r.json()).toMatchObject({
        plugin: 'generate-text',
        message: expect.stringContaining('Echo: call'),
        payment: { method: 'session' },
      });
    }
    expect(ok.map((r) => r.headers['x-session-remaining']).sort()).toEqual([
      '0.00',
      '0.01',
      '0.02',
      '0.03',
      '0.04',
      '0.05',
      '0.06',
      '0.07',
      '0.08',
      '0.09',
    ]);
    const view = await t.web.inject({ method: 'GET', url: '/api/wallet/sessions', headers: { 'x-session-id': s.sessionId } });
    expect(view.json()).toMatchObject({ remaining: '0.00', debits: 10 });
    const listed = await t.web.inject({ method: 'GET', url: '/api/wallet/sessions/receipts', headers: { 'x-session-id': s.sessionId } });
    expect((listed.json() as { receipts: unknown[] }).receipts).toHaveLength(10);
    expect(await t.platform.services.ledger.audit()).toEqual([]);
  });

  it('the receipt is an EIP-712 signature by the platform key that a client can verify', async () => {
    const pk = generatePrivateKey();
    await fund(privateKeyToAccount(pk).address.toLowerCase(), 100_000);
    const s = await openSession(pk, '0.05');
    const res = await gw(sessionHeaders(s));
    expect(res.statusCode).toBe(200);
    const signer = (await t.web.inject({ method: 'GET', url: '/api/payments/receipt-signer' })).json() as {
      address: Hex;
      domain: ReturnType<typeof paymentDomain>;
    };
    expect(signer.domain).toEqual(paymentDomain(CHAIN_ID, signer.address));
    const nonce = String(res.headers['payment-receipt']).split(':').pop()!;
    const recovered = await recoverTypedDataAddress({
      domain: signer.domain,
      types: receiptTypes,
      primaryType: 'Receipt',
      message: { session: await sessionRef(s.sessionId), nonce: `0x${nonce}`, amount: 10_000n, plugin: 'generate-text' },
      signature: res.headers['payment-receipt-signature'] as Hex,
    });
    expect(recovered).toBe(signer.address);
    expect(res.json().payment.signature).toBe(res.headers['payment-receipt-signature']);
    expect(res.headers['x-session-remaining']).toBe('0.04');
  });

  it('402 session_required, session_invalid; 400 unknown_plugin; 502 no_plugin; 402 payment_required without payment', async () => {
    const pk = generatePrivateKey();
    await fund(privateKeyToAccount(pk).address.toLowerCase(), 100_000);
    const s = await openSession(pk, '0.05');
    expect((await gw({ 'x-payment-method': 'session' })).json()).toMatchObject({ error: 'session_required' });
    expect((await gw({ 'x-payment-method': 'session', 'x-session-id': s.sessionId })).statusCode).toBe(402);
    const wrongWallet = await gw({ ...sessionHeaders(s), 'x-wallet-address': `0x${'cd'.repeat(20)}` });
    expect([wrongWallet.statusCode, wrongWallet.json().error]).toEqual([402, 'session_invalid']);
    const unknown = await gw({ ...sessionHeaders(s), 'x-session-id': `ps_${'A'.repeat(43)}` });
    expect(unknown.json().error).toBe('session_invalid');
    const badPlugin = await gw(sessionHeaders(s), { plugin: 'nope' });
    expect([badPlugin.statusCode, badPlugin.json().error]).toEqual([400, 'unknown_plugin']);
    const noPlugin = await gw({}, { plugin: 'nope' });
    expect([noPlugin.statusCode, noPlugin.json().error]).toEqual([502, 'no_plugin']);
    const unpaid = await gw({});
    expect(unpaid.statusCode).toBe(402);
    expect(unpaid.json()).toMatchObject({ error: 'payment_required', stripe: { checkoutUrl: null, amount: 1, currency: 'usd' } });
    const badMethod = await gw({ 'x-payment-method': 'gold' });
    expect(badMethod.statusCode).toBe(400);
    const badInput = await gw(sessionHeaders(s), { plugin: 'generate-text', messages: 'hi' });
    expect(badInput.statusCode).toBe(400);
    expect(
      (await t.web.inject({ method: 'GET', url: '/api/wallet/sessions', headers: { 'x-session-id': s.sessionId } })).json(),
    ).toMatchObject({ remaining: '0.05', debits: 0 });
  });

  it('a plugin that fails is not charged (the debit is refunded once)', async () => {
    const pk = generatePrivateKey();
    await fund(privateKeyToAccount(pk).address.toLowerCase(), 100_000);
    const s = await openSession(pk, '0.05');
    // every model fails upstream
    router.failModels = new (class extends Set<string> {
      override has() {
        return true;
      }
    })();
    const res = await gw(sessionHeaders(s));
    expect([res.statusCode, res.json().error]).toEqual([500, 'internal']);
    router.failModels = new Set();
    const view = await t.web.inject({ method: 'GET', url: '/api/wallet/sessions', headers: { 'x-session-id': s.sessionId } });
    expect(view.json()).toMatchObject({ remaining: '0.05' });
    expect(await t.platform.services.ledger.audit()).toEqual([]);
  });

  it('close returns the remainder to the wallet; a closed session is session_invalid', async () => {
    const pk = generatePrivateKey();
    const address = privateKeyToAccount(pk).address.toLowerCase();
    await fund(address, 100_000);
    const s = await openSession(pk, '0.05');
    expect((await gw(sessionHeaders(s))).statusCode).toBe(200);
    const closed = await t.web.inject({ method: 'DELETE', url: '/api/wallet/sessions', headers: { 'x-session-id': s.sessionId } });
    expect(closed.json()).toMatchObject({ status: 'closed', remaining: '0.00', returned: '0.04' });
    expect(await t.platform.services.ledger.balance(address)).toBe(90_000);
    const again = await t.web.inject({ method: 'DELETE', url: '/api/wallet/sessions', headers: { 'x-session-id': s.sessionId } });
    expect(again.json()).toMatchObject({ returned: '0.00' });
    expect(await t.platform.services.ledger.balance(address)).toBe(90_000);
    expect((await gw(sessionHeaders(s))).json().error).toBe('session_invalid');
    expect((await t.web.inject({ method: 'DELETE', url: '/api/wallet/sessions' })).statusCode).toBe(400);
    expect((await t.web.inject({ method: 'GET', url: '/api/wallet/sessions', headers: { 'x-session-id': 'ps_nope' } })).statusCode).toBe(
      404,
    );
  });

  it('the expiry job ends sessions past their expiry and returns the remainder', async () => {
    const pk = generatePrivateKey();
    const address = privateKeyToAccount(pk).address.toLowerCase();
    await fund(address, 100_000);
    const s = await openSession(pk, '0.05');
    // move the schedule into the past (the expiry time is not money, so it may be changed directly)
    await sql`UPDATE payment_sessions SET expires_at = now() - interval '1 second' WHERE address = ${address}`.execute(
      t.database.db.kysely,
    );
    expect((await gw(sessionHeaders(s))).json().error).toBe('session_invalid');
    expect(await t.platform.services.paymentSessions.expireDue()).toBeGreaterThanOrEqual(1);
    expect(await t.platform.services.ledger.balance(address)).toBe(100_000);
    const view = await t.web.inject({ method: 'GET', url: '/api/wallet/sessions', headers: { 'x-session-id': s.sessionId } });
    expect(view.json()).toMatchObject({ status: 'expired', remaining: '0.00' });
  });

  it('voucher_failed when the receipt cannot be signed; nothing is charged', async () => {
    const pk = generatePrivateKey();
    await fund(privateKeyToAccount(pk).address.toLowerCase(), 100_000);
    const s = await openSession(pk, '0.05');
    const real = createReceiptSigner(generatePrivateKey(), CHAIN_ID);
    const broken = createPaymentSessionsService({
      db: t.database.db,
      signer: { ...real, sign: async () => Promise.reject(new Error('signing key unavailable')) },
      chainId: CHAIN_ID,
      ttlMs: 60_000,
    });
    expect(await broken.debit(s.sessionId, s.address, 10_000, 'generate-text')).toEqual({ ok: false, code: 'VOUCHER_FAILED' });
    expect(await broken.get(s.sessionId)).toMatchObject({ remaining: '0.05', debits: 0 });
  });
});
