/**
 * §7 on every payments endpoint (13.9): bad input answers 4xx with a JSON `error` string, never
 * 5xx, and changes nothing (the journal, balances and sessions are the same afterwards).
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
let router: FakeOpenAi;
const ADDRESS = `0x${'12'.repeat(20)}`;

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: 'router-key', quiet: true });
  t = await startTestPlatform({ ROUTER_API_KEY: 'router-key', ROUTER_BASE_URL: router.url });
  await t.platform.services.ledger.credit({ address: ADDRESS, amountMicros: 1_000_000, eventId: 'evt_bad_input', source: 'test' });
});
afterAll(async () => {
  await t?.close();
  await router?.close();
});

const snapshot = async () => {
  const r = await sql<{
    s: string;
  }>`SELECT (SELECT count(*) FROM ledger_entries)::text || '/' || (SELECT count(*) FROM payment_sessions)::text
    || '/' || (SELECT coalesce(sum(balance_micros), 0) FROM wallet_balances)::text || '/' || (SELECT count(*) FROM mpp_payments)::text AS s`.execute(
    t.database.db.kysely,
  );
  return r.rows[0]!.s;
};

const JSON_CT = { 'content-type': 'application/json' };
const BODIES: [string, { payload?: string; headers: Record<string, string> }][] = [
  ['malformed JSON', { payload: '{"address": ', headers: JSON_CT }],
  ['an array', { payload: '[1,2]', headers: JSON_CT }],
  ['a string', { payload: '"x"', headers: JSON_CT }],
  ['null', { payload: 'null', headers: JSON_CT }],
  ['NUL bytes', { payload: '{"address":"\\u0000","deposit":"\\u0000"}', headers: JSON_CT }],
  ['huge field', { payload: JSON.stringify({ address: 'x'.repeat(200_000), deposit: 'y'.repeat(100) }), headers: JSON_CT }],
  [
    'nested objects',
    { payload: JSON.stringify({ address: { a: 1 }, deposit: [1], signature: {}, deadline: 'soon', salt: 5 }), headers: JSON_CT },
  ],
  ['numbers out of range', { payload: JSON.stringify({ address: ADDRESS, deposit: 1e300 }), headers: JSON_CT }],
  ['text/plain', { payload: 'address=x', headers: { 'content-type': 'text/plain' } }],
];

const GATEWAY_CASES: [string, Record<string, string>, unknown][] = [
  [
    'messages not an array',
    { 'x-payment-method': 'session', 'x-session-id': 'ps_x', 'x-wallet-address': ADDRESS },
    { plugin: 'generate-text', messages: 'hi' },
  ],
  ['empty messages', {}, { plugin: 'generate-text', messages: [] }],
  ['bad role', {}, { plugin: 'agent', messages: [{ role: 'root', content: 'x' }] }],
  ['max_tokens negative', {}, { plugin: 'generate-text', prompt: 'x', max_tokens: -1 }],
  ['plugin not a string', {}, { plugin: 42 }],
  ['unknown payment method', { 'x-payment-method': 'barter' }, { plugin: 'generate-text', prompt: 'x' }],
  ['stt without audio', {}, { plugin: 'stt' }],
  ['garbage Payment credential', { authorization: 'Payment %%%' }, { plugin: 'generate-text', prompt: 'x' }],
  ['Bearer garbage', { authorization: 'Bearer nope' }, { plugin: 'generate-text', prompt: 'x' }],
];

describe('payments endpoints refuse bad input with 4xx JSON and change nothing', () => {
  it('POST /api/wallet/sessions and POST /api/v1/gateway with bodies that are not a JSON object', async () => {
    const before = await snapshot();
    for (const url of ['/api/wallet/sessions', '/api/v1/gateway']) {
      for (const [name, req] of BODIES) {
        const res = await t.web.inject({ method: 'POST', url, ...req });
        expect(res.statusCode, `${url} ${name}: ${res.body}`).toBeGreaterThanOrEqual(400);
        expect(res.statusCode, `${url} ${name}`).toBeLessThan(500);
        expect(typeof res.json().error, `${url} ${name}`).toBe('string');
      }
    }
    expect(await snapshot()).toBe(before);
  });

  it('POST /api/v1/gateway with bad fields and headers', async () => {
    const before = await snapshot();
    for (const [name, headers, payload] of GATEWAY_CASES) {
      const res = await t.web.inject({
        method: 'POST',
        url: '/api/v1/gateway',
        headers: { ...JSON_CT, ...headers },
        payload: JSON.stringify(payload),
      });
      expect(res.statusCode, `${name}: ${res.body}`).toBeGreaterThanOrEqual(400);
      expect(res.statusCode, name).toBeLessThan(500);
      expect(typeof res.json().error, name).toBe('string');
    }
    expect(await snapshot()).toBe(before);
  });

  it('GET/DELETE /api/wallet/sessions and receipts with missing or odd session ids', async () => {
    const before = await snapshot();
    for (const method of ['GET', 'DELETE'] as const) {
      for (const url of method === 'GET' ? ['/api/wallet/sessions', '/api/wallet/sessions/receipts'] : ['/api/wallet/sessions']) {
        for (const id of [undefined, '', 'ps_', 'x'.repeat(5000), `ps_${'A'.repeat(43)}`, "ps_'; DROP TABLE ledger_entries; --"]) {
          const res = await t.web.inject({ method, url, headers: id === undefined ? {} : { 'x-session-id': id } });
          expect([400, 404], `${method} ${url} ${String(id).slice(0, 20)}`).toContain(res.statusCode);
          expect(typeof res.json().error).toBe('string');
        }
      }
    }
    expect(await snapshot()).toBe(before);
  });
});
