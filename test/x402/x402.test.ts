/**
 * §4.11 x402 gateway against a local fake gateway (test/fakes/x402-gateway.ts): health and its
 * 503s, every POST action and every §4.11 error text, the 10 s colony join cut (§8), the payment
 * audit (accepted and refused rows; the request role cannot change them), and an x402 challenge
 * paid with the official @x402 client packages (the signature is checked with viem).
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import { X402_COLONY_JOIN_TIMEOUT_MS } from '../../src/domains/x402/x402.client.ts';
import { type FakeX402Gateway, startFakeX402Gateway } from '../fakes/x402-gateway.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { userWithAgent } from './fixtures.ts';

const MANY_SIGNUPS = { REGISTER_RATE_LIMIT: '100000' };
const EVM = '0x52908400098527886E0F7030069857D2E4169EE7';
const SOLANA = '7EcDhSYGxXyscszYEp35KHN8vvw3svAuLKTzXwCFLtV';

let fake: FakeX402Gateway;
let t: TestPlatform; // gateway and payer configured
let unconfigured: TestPlatform; // X402_GATEWAY_URL unset
let down: TestPlatform; // X402_GATEWAY_URL points at a port nobody listens on

beforeAll(async () => {
  fake = await startFakeX402Gateway();
  const deadUrl = `http://127.0.0.1:${await freePort()}`;
  [t, unconfigured, down] = await Promise.all([
    startTestPlatform({ ...MANY_SIGNUPS, X402_GATEWAY_URL: fake.url }),
    startTestPlatform(MANY_SIGNUPS),
    startTestPlatform({ ...MANY_SIGNUPS, X402_GATEWAY_URL: deadUrl }),
  ]);
});
afterAll(async () => {
  await Promise.all([t?.close(), unconfigured?.close(), down?.close()]);
  await fake?.close();
});

const post = (p: TestPlatform, payload: unknown, cookie?: string) =>
  p.web.inject({ method: 'POST', url: '/api/x402', payload: payload as object, ...(cookie ? { headers: { cookie } } : {}) });
describe('§4.11 GET /api/x402', () => {
  it("returns the gateway's health fields plus gateway and status, without a session", async () => {
    fake.modes = {};
    const res = await t.web.inject({ method: 'GET', url: '/api/x402' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      status: 'healthy',
      service: 'fake-x402',
      agents: 3,
      colonies: 1,
      timestamp: '2026-01-01T00:00:00.000Z',
      gateway: fake.url,
    });
  });

  it("503 {gateway, status:'unreachable', error} when nothing listens, when the gateway fails, and when it hangs (cut short)", async () => {
    const dead = await down.web.inject({ method: 'GET', url: '/api/x402' });
    expect(dead.statusCode).toBe(503);
    expect(dead.json()).toMatchObject({ gateway: down.config.X402_GATEWAY_URL, status: 'unreachable', error: 'Gateway unreachable' });

    fake.modes = { health: 'fail' };
    const failed = await t.web.inject({ method: 'GET', url: '/api/x402' });
    expect(failed.statusCode).toBe(503);
    expect(failed.json()).toMatchObject({ gateway: fake.url, status: 'unreachable', error: 'Gateway answered 500' });

    fake.modes = { health: 'hang' };
    const started = Date.now();
    const hung = await t.web.inject({ method: 'GET', url: '/api/x402' });
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(hung.statusCode).toBe(503);
    expect(hung.json()).toMatchObject({ gateway: fake.url, status: 'unreachable', error: 'Gateway did not answer in time' });
    fake.modes = {};
  }, 15_000);

  it('503 when X402_GATEWAY_URL is unset (GET and POST)', async () => {
    const res = await unconfigured.web.inject({ method: 'GET', url: '/api/x402' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ gateway: null, status: 'unconfigured', error: 'x402 gateway not configured' });
    const endpoints = await post(unconfigured, { action: 'endpoints' });
    expect(endpoints.statusCode).toBe(503);
    expect(endpoints.json().error).toBe('x402 gateway not configured');
  });
});

describe('§4.11 POST /api/x402 actions', () => {
  it('endpoints works without a session; every other action answers 401 Authentication required', async () => {
    fake.modes = {};
    const res = await post(t, { action: 'endpoints' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ endpoints: [{ slug: 'weather', description: 'Weather now', price: '0.01' }] });
    for (const action of ['join-colony', 'fitness', 'pricing', 'pay']) {
      const r = await post(t, { action, agentId: 'a1', walletAddress: EVM, amount: 1, recipient: EVM });
      expect(r.statusCode, action).toBe(401);
      expect(r.json(), action).toEqual({ error: 'Authentication required' });
    }
  });

  it('Invalid action (missing, unknown, not a string), with or without a session', async () => {
    const u = await signUp(t.web);
    for (const body of [{}, { action: 'steal' }, { action: 7 }]) {
      for (const cookie of [undefined, u.cookie]) {
        const r = await post(t, body, cookie);
        expect(r.statusCode).toBe(400);
        expect(r.json()).toEqual({ error: 'Invalid action. Use: join-colony, fitness, pricing, endpoints, or pay' });
      }
    }
  });

  it('fitness and pricing pass the gateway answer; agentId required; gateway failure is 500 x402 gateway error', async () => {
    fake.modes = {};
    const u = await userWithAgent(t);
    const fitness = await post(t, { action: 'fitness', agentId: u.agentId }, u.cookie);
    expect(fitness.statusCode).toBe(200);
    expect(fitness.json()).toMatchObject({
      score: 72,
      tier: 'silver',
      details: { prediction: 70, execution: 75, coordination: 71 },
      agent: u.agentId,
    });
    const pricing = await post(t, { action: 'pricing', agentId: ` ${u.agentId} ` }, u.cookie);
    expect(pricing.json()).toEqual({
      agentId: u.agentId,
      tier: 'silver',
      pricing: { rate: 0.01, discount: 0.1 },
      fitness: { score: 72, tier: 'silver' },
    });
    for (const action of ['fitness', 'pricing', 'join-colony', 'pay']) {
      for (const agentId of [undefined, '', '  ', 5]) {
        const r = await post(t, { action, agentId, walletAddress: EVM, amount: 1, recipient: EVM }, u.cookie);
        expect(r.statusCode, `${action} ${String(agentId)}`).toBe(400);
        expect(r.json()).toEqual({ error: 'agentId required' });
      }
    }
    for (const mode of ['fail', 'invalid-json'] as const) {
      fake.modes = { fitness: mode, pricing: mode, endpoints: mode };
      for (const action of ['fitness', 'pricing', 'endpoints']) {
        const r = await post(t, { action, agentId: u.agentId }, u.cookie);
        expect(r.statusCode, `${action} ${mode}`).toBe(500);
        expect(r.json()).toEqual({ error: 'x402 gateway error' });
      }
    }
    fake.modes = {};
  });

  it('join-colony: walletAddress rules, the answer, 402 and 502 texts, 503 Colony gateway unreachable', async () => {
    const u = await userWithAgent(t);
    const a1 = u.agentId;
    const missing = await post(t, { action: 'join-colony', agentId: a1 }, u.cookie);
    expect(missing.statusCode).toBe(400);
    expect(missing.json()).toEqual({ error: 'walletAddress required' });
    const bad = await post(t, { action: 'join-colony', agentId: a1, walletAddress: '0x123' }, u.cookie);
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: 'Invalid wallet address' });

    fake.modes = {};
    const ok = await post(t, { action: 'join-colony', agentId: a1, walletAddress: EVM }, u.cookie);
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ joined: true, agentId: a1, walletAddress: EVM, colony: 'alpha' });

    fake.modes = { colony: 'payment-required' };
    const paymentRequired = await post(t, { action: 'join-colony', agentId: a1, walletAddress: SOLANA }, u.cookie);
    expect(paymentRequired.statusCode).toBe(402);
    expect(paymentRequired.json().error).toBe('Colony join failed: 402 {"error":"stake required"}');

    fake.modes = { colony: 'fail' };
    const failed = await post(t, { action: 'join-colony', agentId: a1, walletAddress: EVM }, u.cookie);
    expect(failed.statusCode).toBe(502);
    expect(failed.json().error).toBe('Colony join failed: 500 {"error":"gateway exploded"}');

    const d = await userWithAgent(down);
    const unreachable = await post(down, { action: 'join-colony', agentId: d.agentId, walletAddress: EVM }, d.cookie);
    expect(unreachable.statusCode).toBe(503);
    expect(unreachable.json()).toEqual({ error: 'Colony gateway unreachable' });
    fake.modes = {};
  });

  it("an action naming another user's agent (or none) is 404 Agent not found before the gateway is called; one's own works", async () => {
    fake.modes = {};
    fake.payMode = 'plain';
    const alice = await userWithAgent(t);
    const bob = await userWithAgent(t);
    const { address } = await t.platform.services.sessionWallet.create(alice.id);
    await t.platform.services.ledger.credit({ address, amountMicros: 10_000_000, eventId: `fund:${alice.id}`, source: 'test' });
    const fields = { walletAddress: '0x2222222222222222222222222222222222222222', amount: 1, recipient: EVM };
    const seen = fake.requests.length;
    for (const action of ['join-colony', 'fitness', 'pricing', 'pay']) {
      for (const agentId of [bob.agentId, 'no-such-agent']) {
        const r = await post(t, { action, agentId, ...fields }, alice.cookie);
        expect([r.statusCode, r.json()], `${action} ${agentId}`).toEqual([404, { error: 'Agent not found' }]);
      }
    }
    expect(fake.requests.slice(seen)).toEqual([]);
    // nothing charged; the refused pay is on alice's audit record
    expect(await t.platform.services.ledger.balance(address)).toBe(10_000_000);
    const audit = await t.database.db.withUser(alice.id, (trx) =>
      sql<{ outcome: string; error: string | null }>`select outcome, error from x402_payments_audit order by id`.execute(trx),
    );
    expect(audit.rows.map((row) => [row.outcome, row.error])).toEqual([
      ['refused', 'Agent not found'],
      ['refused', 'Agent not found'],
    ]);

    for (const action of ['join-colony', 'fitness', 'pricing', 'pay']) {
      const r = await post(t, { action, agentId: alice.agentId, ...fields }, alice.cookie);
      expect(r.statusCode, `${action} ${r.body}`).toBe(200);
    }
    expect(fake.requests.slice(seen).map((r) => r.path)).toEqual([
      '/colony/join',
      `/fitness/${alice.agentId}`,
      `/pricing/${alice.agentId}`,
      '/pay',
    ]);
    expect(await t.platform.services.ledger.balance(address)).toBe(9_000_000);
  });

  it('join-colony is cut at 10 s (§8) with 503 Colony gateway unreachable', async () => {
    expect(X402_COLONY_JOIN_TIMEOUT_MS).toBe(10_000);
    const u = await userWithAgent(t);
    fake.modes = { colony: 'hang' };
    const started = Date.now();
    const res = await post(t, { action: 'join-colony', agentId: u.agentId, walletAddress: EVM }, u.cookie);
    const took = Date.now() - started;
    fake.modes = {};
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'Colony gateway unreachable' });
    expect(took).toBeGreaterThanOrEqual(9_900);
    expect(took).toBeLessThan(12_000);
  }, 20_000);
});
