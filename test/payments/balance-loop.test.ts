/**
 * The whole loop of money without a card processor (docs/payments.md "The wallet's balance"):
 * an admin credits a user → GET /api/wallet shows the balance (§4.4 `balance`) → a paid gateway
 * call with an `sk_` key debits it (§4.8 card method, agent $0.05) → the balance is lower → GET
 * /api/wallet/journal shows the credit (with its note) and the debits, each with the balance after.
 * A short balance is §4.8's 402 `payment_required`; parallel calls never overdraw.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { microsToUsd } from '../../src/lib/money.ts';
import { PLUGIN_PRICES } from '../../src/lib/prices.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

let router: FakeOpenAi;
let t: TestPlatform;
let admin: Awaited<ReturnType<typeof signUp>>;
const AGENT_CALL = microsToUsd(PLUGIN_PRICES.agent); // "0.05"

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: 'router-key', quiet: true });
  t = await startTestPlatform({
    STRIPE_SECRET_KEY: '',
    ADMIN_EMAILS: '',
    REGISTER_RATE_LIMIT: '1000',
    AI_RATE_LIMIT: '1000',
    ROUTER_API_KEY: 'router-key',
    ROUTER_BASE_URL: router.url,
  });
  admin = await signUp(t.web);
  await t.platform.services.admin.setAdminByEmail(admin.email, true);
});
afterAll(async () => {
  if (t) expect(await t.platform.services.ledger.audit()).toEqual([]);
  await t?.close();
  await router?.close();
});

const credit = (userId: string, amountUsd: number, note?: string) =>
  t.web.inject({
    method: 'POST',
    url: `/api/admin/users/${userId}/credit`,
    headers: { cookie: admin.cookie, 'idempotency-key': randomUUID() },
    payload: { amountUsd, ...(note !== undefined ? { note } : {}) },
  });
const get = (url: string, cookie: string) => t.web.inject({ method: 'GET', url, headers: { cookie } });
const balance = async (cookie: string) => (await get('/api/wallet', cookie)).json().balance as string;
const agentCall = (key: string, content = 'hello') =>
  t.web.inject({
    method: 'POST',
    url: '/api/v1/gateway',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    payload: { plugin: 'agent', messages: [{ role: 'user', content }] },
  });
async function apiKey(cookie: string) {
  const res = await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie }, payload: { name: 'loop' } });
  expect(res.statusCode, res.body).toBeLessThan(300);
  return res.json().key as string;
}

describe('admin credit → balance → sk_ paid call → journal', () => {
  it('walks the loop: the credit is the balance, each agent call takes $0.05, the journal shows both', async () => {
    expect(AGENT_CALL).toBe('0.05');
    const u = await signUp(t.web);
    const key = await apiKey(u.cookie);
    expect(key).toMatch(/^sk_/);
    // no balance yet: §4.8 402 payment_required, and nothing debited
    const broke = await agentCall(key);
    expect([broke.statusCode, broke.json().error]).toEqual([402, 'payment_required']);

    expect((await credit(u.id, 0.12, 'Trial credit')).statusCode).toBe(200);
    expect(await balance(u.cookie)).toBe('0.12');

    const first = await agentCall(key, 'first');
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toMatchObject({ plugin: 'agent', message: 'Echo: first', payment: { method: 'stripe' } });
    expect(await balance(u.cookie)).toBe('0.07');
    expect((await agentCall(key, 'second')).statusCode).toBe(200);
    expect(await balance(u.cookie)).toBe('0.02');

    const short = await agentCall(key, 'third');
    expect(short.statusCode).toBe(402);
    expect(short.json()).toMatchObject({ error: 'payment_required', balance: '0.02', cost: '0.05' });
    expect(short.json().message).toMatch(/Your balance \(\$0\.02\) does not cover this call \(\$0\.05\)/);
    expect(await balance(u.cookie)).toBe('0.02');

    const journal = await get('/api/wallet/journal', u.cookie);
    expect(journal.statusCode).toBe(200);
    expect(journal.json()).toMatchObject({ balance: '0.02', nextBefore: null });
    expect(
      journal.json().entries.map((e: Record<string, unknown>) => [e.kind, e.amountUsd, e.balanceAfterUsd, e.description, e.note]),
    ).toEqual([
      ['debit', '-0.05', '0.02', 'Gateway call: agent', null],
      ['debit', '-0.05', '0.07', 'Gateway call: agent', null],
      ['credit', '0.12', '0.12', 'Credit by an admin', 'Trial credit'],
    ]);
  });

  it('parallel paid calls never overdraw: exactly as many succeed as the balance covers', async () => {
    const u = await signUp(t.web);
    const key = await apiKey(u.cookie);
    expect((await credit(u.id, 0.25)).statusCode).toBe(200); // five agent calls
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => agentCall(key, `call ${i}`)));
    const codes = results.map((r) => r.statusCode).sort();
    expect(codes).toEqual([...Array(5).fill(200), ...Array(7).fill(402)]);
    expect(await balance(u.cookie)).toBe('0');
    const entries = (await get('/api/wallet/journal?limit=100', u.cookie)).json().entries as { kind: string; balanceAfterUsd: string }[];
    expect(entries.filter((e) => e.kind === 'debit')).toHaveLength(5);
    expect(entries.every((e) => !e.balanceAfterUsd.startsWith('-'))).toBe(true);
  });
});

describe('GET /api/wallet/journal', () => {
  it('401 signed out; no wallet → empty; pages newest first with `before`; only the caller’s own rows', async () => {
    expect((await t.web.inject({ method: 'GET', url: '/api/wallet/journal' })).statusCode).toBe(401);
    const u = await signUp(t.web);
    const other = await signUp(t.web);
    expect((await get('/api/wallet/journal', other.cookie)).json()).toEqual({ address: null, balance: '0', entries: [], nextBefore: null });
    for (const [amount, note] of [
      [1, 'one'],
      [2, 'two'],
      [3, 'three'],
    ] as const) {
      expect((await credit(u.id, amount, note)).statusCode).toBe(200);
    }
    const page1 = (await get('/api/wallet/journal?limit=2', u.cookie)).json();
    expect(page1.entries.map((e: { note: string }) => e.note)).toEqual(['three', 'two']);
    expect(page1.entries[0].balanceAfterUsd).toBe('6.00');
    const page2 = (await get(`/api/wallet/journal?limit=2&before=${page1.nextBefore}`, u.cookie)).json();
    expect(page2.entries.map((e: { note: string; balanceAfterUsd: string }) => [e.note, e.balanceAfterUsd])).toEqual([['one', '1.00']]);
    expect(page2.nextBefore).toBeNull();
    // the other user still sees nothing of it
    expect((await get('/api/wallet/journal', other.cookie)).json().entries).toEqual([]);
    expect((await get('/api/wallet/journal?limit=0', u.cookie)).statusCode).toBe(400);
    expect((await get('/api/wallet/journal?limit=101', u.cookie)).statusCode).toBe(400);
  });
});
