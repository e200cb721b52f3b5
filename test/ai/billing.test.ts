/**
 * Model calls paid from the balance (AI_BILLING=balance; docs/payments.md "Model calls from the
 * balance"): before a call its most possible cost is held against the owner's balance (402 when the
 * balance cannot cover it, in OpenAI's shape on the model gateway), after it the real cost is paid
 * from the balance through the ledger in the same transaction that writes the usage, and the
 * journal's `ai_usage` debits agree with the usage cost to the micro-dollar. Concurrent calls never
 * take a balance below zero. An unpriced model is refused (naming MODEL_PRICES), never free; a
 * MODEL_PRICES price makes it billable. Real sockets, the official `openai` client, the fake provider.
 */
import OpenAI, { APIError } from 'openai';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { MODEL_GATEWAY_PATH } from '../../src/config/env.ts';
import { createMemoryRateLimiter } from '../../src/lib/rate-limiter.ts';
import { createPlatform } from '../../src/platform.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { FAKE_USAGE, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { TEST_SECRETS } from '../helpers/platform.ts';

const ROUTER_KEY = 'router-secret-key-of-the-operator';
/** openai/gpt-4o-mini: $0.15 and $0.60 per million tokens: $0.0000045 per fake call */
const CALL_COST = FAKE_USAGE.prompt_tokens * 0.15e-6 + FAKE_USAGE.completion_tokens * 0.6e-6;

let t: AgentsTestPlatform;
let router: FakeOpenAi;
let custom: FakeOpenAi;
let gateway: string;

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: ROUTER_KEY });
  custom = await startFakeOpenAi({ apiKey: 'custom-key' });
  t = await startAgentsPlatform({
    env: {
      ROUTER_API_KEY: ROUTER_KEY,
      ROUTER_BASE_URL: router.url,
      AI_CUSTOM_BASE_URL: custom.url,
      AI_CUSTOM_API_KEY: 'custom-key',
      AI_CUSTOM_MODEL: 'house-model',
      AI_BILLING: 'balance',
      AGENT_GATEWAY_RATE_LIMIT: '1000',
      AI_RATE_LIMIT: '1000',
    },
  });
  gateway = `${t.backendUrl}${MODEL_GATEWAY_PATH}`;
});
afterAll(async () => {
  await t?.close();
  await router?.close();
  await custom?.close();
});
beforeEach(() => router.reset());

async function deploy(userId: string) {
  const res = await t.backend.inject({
    method: 'POST',
    url: '/api/deployments',
    headers: bearer(t),
    payload: { userId, name: 'Billed', plan: 'network', model: 'openai/gpt-4o-mini' },
  });
  expect(res.statusCode, res.body).toBe(202);
  const agentId = res.json().agent.id as string;
  const spec = await eventually(async () => t.driver.deploys.findLast((s) => s.agentId === agentId));
  return { agentId, key: spec.platformApiKey as string };
}

/** Credits `usd` to the user's wallet through the ledger (as a card top-up does). */
async function credit(userId: string, usd: number) {
  // the journal keys wallets by their lower-case address
  const address = (await t.platform.services.sessionWallet.ensureAddress(userId)).toLowerCase();
  await t.platform.services.ledger.credit({
    address,
    amountMicros: Math.round(usd * 1e6),
    eventId: `test-credit-${userId}-${Math.random()}`,
    source: 'card_top_up',
  });
  return address;
}
const balanceOf = (address: string) => t.platform.services.ledger.balance(address);
const client = (key: string) => new OpenAI({ apiKey: key, baseURL: gateway, maxRetries: 0 });
const ask = (key: string, extra: Record<string, unknown> = {}) =>
  client(key).chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], ...extra });

describe('a model call is paid from the balance', () => {
  it('without a balance: 402 in OpenAI shape, the provider not contacted', async () => {
    const u = await subscriber(t, 'network');
    const a = await deploy(u.id);
    const err = (await ask(a.key).catch((e: unknown) => e)) as APIError;
    expect(err).toBeInstanceOf(APIError);
    expect(err.status).toBe(402);
    expect(err.error).toMatchObject({ type: 'insufficient_quota', code: 'balance_too_low' });
    expect(err.message).toContain('Model calls are paid from your balance, which is empty');
    // (provisioning read the router's model list; no chat reached it)
    expect(router.requests.filter((r) => r.path.endsWith('/chat/completions'))).toHaveLength(0);
  });

  it('after a credit the call runs, and the balance drops by exactly the usage cost; the journal names the usage rows', async () => {
    const u = await subscriber(t, 'network');
    const a = await deploy(u.id);
    const address = await credit(u.id, 1);
    // max_tokens keeps the hold small; calls one after another
    for (let i = 0; i < 250; i++) await ask(a.key, { max_tokens: 5 });
    await t.platform.services.ai.usage.flush();
    const rows = await t.database.db.kysely
      .selectFrom('ai_usage')
      .select(['cost', 'requests', 'billing_event', 'priced'])
      .where('user_id', '=', u.id)
      .execute();
    const usageCost = rows.reduce((s, r) => s + Number(r.cost), 0);
    expect(rows.reduce((n, r) => n + r.requests, 0)).toBe(250);
    expect(usageCost).toBeCloseTo(250 * CALL_COST, 10);
    const journal = await t.database.db.kysely
      .selectFrom('ledger_entries')
      .select(['wallet_delta', 'event_id', 'source'])
      .where('address', '=', address)
      .where('source', '=', 'ai_usage')
      .execute();
    const debited = journal.reduce((s, r) => s - Number(r.wallet_delta), 0);
    // to the micro-dollar: the journal pays whole micro-dollars of the running total
    expect(Math.abs(debited / 1e6 - usageCost)).toBeLessThan(1e-6);
    expect(await balanceOf(address)).toBe(1_000_000 - debited);
    // every debit is the batch its usage rows name
    for (const j of journal) expect(rows.some((r) => r.billing_event === j.event_id)).toBe(true);
    // GET /api/usage says the same cost
    const report = await t.web.inject({ method: 'GET', url: '/api/usage', headers: { cookie: u.cookie } });
    expect(Math.abs(report.json().totals.cost - debited / 1e6)).toBeLessThan(1e-6);
    // no hold is left once the calls have ended and the process's block of the balance, unused for
    // a second, is given back (balance-leases.service.ts)
    const held = async () => {
      await t.platform.services.ai.usage.flush();
      const row = await t.database.db.kysely
        .selectFrom('spend_holds')
        .select((eb) => eb.fn.sum<string>('reserved').as('held'))
        .where('scope', '=', `balance:${address}`)
        .executeTakeFirst();
      return Number(row?.held ?? 0);
    };
    await vi.waitFor(async () => expect(await held()).toBe(0), { timeout: 5_000, interval: 100 });
  });

  it('40 concurrent calls against a small balance never take it below zero, and only calls it could cover ran', async () => {
    const u = await subscriber(t, 'network');
    const a = await deploy(u.id);
    // each call holds about $0.000016 (prompt + 5 tokens at the dearest fallback's price): room for 3 at once
    const address = await credit(u.id, 0.00005);
    router.delayMs = 100;
    const results = await Promise.allSettled(Array.from({ length: 40 }, () => ask(a.key, { max_tokens: 5 })));
    router.delayMs = 0;
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    const refused = results.filter((r) => r.status === 'rejected' && (r.reason as APIError).status === 402).length;
    const other = results.flatMap((r) =>
      r.status === 'rejected' && (r.reason as APIError).status !== 402 ? [String((r.reason as Error).message ?? r.reason)] : [],
    );
    expect(other, 'every call either ran or was refused with 402').toEqual([]);
    expect(ok + refused).toBe(40);
    expect(ok).toBeGreaterThanOrEqual(1);
    expect(ok).toBeLessThan(40);
    await t.platform.services.ai.usage.flush();
    const balance = await balanceOf(address);
    expect(balance).toBeGreaterThanOrEqual(0);
    const rows = await t.database.db.kysely.selectFrom('ai_usage').select(['cost', 'requests']).where('user_id', '=', u.id).execute();
    expect(rows.reduce((n, r) => n + r.requests, 0)).toBe(ok);
    expect(Math.abs((50 - balance) / 1e6 - rows.reduce((s, r) => s + Number(r.cost), 0))).toBeLessThan(1e-6);
  });

  it('the same with the agent known to have no budget, whose calls are held in groups: never below zero, only covered calls ran', async () => {
    const u = await subscriber(t, 'network');
    const a = await deploy(u.id);
    // an empty wallet refuses a first call, which tells the gateway the agent has no budget: its
    // concurrent calls are then held in groups (one statement for the calls that arrive meanwhile)
    await t.platform.services.sessionWallet.ensureAddress(u.id);
    expect(((await ask(a.key, { max_tokens: 5 }).catch((e: unknown) => e)) as APIError).status).toBe(402);
    const address = await credit(u.id, 0.00005);
    router.delayMs = 100;
    const results = await Promise.allSettled(Array.from({ length: 40 }, () => ask(a.key, { max_tokens: 5 })));
    router.delayMs = 0;
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    const refused = results.filter((r) => r.status === 'rejected' && (r.reason as APIError).status === 402).length;
    expect(ok + refused).toBe(40);
    // room for 3 holds at once: a group the balance refuses is asked again call by call, so as many ran
    expect(ok).toBeGreaterThanOrEqual(3);
    expect(ok).toBeLessThan(40);
    await t.platform.services.ai.usage.flush();
    const balance = await balanceOf(address);
    expect(balance).toBeGreaterThanOrEqual(0);
    const rows = await t.database.db.kysely.selectFrom('ai_usage').select(['cost', 'requests']).where('user_id', '=', u.id).execute();
    expect(rows.reduce((n, r) => n + r.requests, 0)).toBe(ok);
    expect(Math.abs((50 - balance) / 1e6 - rows.reduce((s, r) => s + Number(r.cost), 0))).toBeLessThan(1e-6);
  });

  it('two platform processes calling for one wallet at once: their blocks of the balance never let it pay more than it has', async () => {
    // a second process over the same database: its own holder, its own blocks (balance-leases.service.ts)
    const other = createPlatform({
      config: t.config,
      db: t.database.db,
      secrets: TEST_SECRETS,
      logger: pino({ level: 'silent' }),
      rateLimiter: createMemoryRateLimiter(),
      driver: t.driver,
    });
    const otherBackend = await other.buildBackendApp();
    await otherBackend.listen({ host: '127.0.0.1', port: 0 });
    try {
      const otherGateway = `http://127.0.0.1:${(otherBackend.server.address() as { port: number }).port}${MODEL_GATEWAY_PATH}`;
      const askOther = (key: string) =>
        new OpenAI({ apiKey: key, baseURL: otherGateway, maxRetries: 0 }).chat.completions.create({
          model: 'openai/gpt-4o-mini',
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 5,
        });
      const u = await subscriber(t, 'network');
      const a = await deploy(u.id);
      // the agent known to have no budget in both processes (a first refused call each), so both take blocks
      await t.platform.services.sessionWallet.ensureAddress(u.id);
      await ask(a.key, { max_tokens: 5 }).catch(() => undefined);
      await askOther(a.key).catch(() => undefined);
      // room for about 40 holds (~$0.0000047 each): two blocks of 16 and a few more, not the 80 calls
      const address = await credit(u.id, 0.0002);
      router.delayMs = 20;
      const results = await Promise.allSettled([
        ...Array.from({ length: 40 }, () => ask(a.key, { max_tokens: 5 })),
        ...Array.from({ length: 40 }, () => askOther(a.key)),
      ]);
      router.delayMs = 0;
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      const refused = results.filter((r) => r.status === 'rejected' && (r.reason as APIError).status === 402).length;
      expect(ok + refused).toBe(80);
      expect(ok).toBeGreaterThan(0);
      expect(refused).toBeGreaterThan(0);
      await Promise.all([t.platform.services.ai.usage.flush(), other.services.ai.usage.flush()]);
      const balance = await balanceOf(address);
      expect(balance).toBeGreaterThanOrEqual(0);
      const rows = await t.database.db.kysely.selectFrom('ai_usage').select(['cost', 'requests']).where('user_id', '=', u.id).execute();
      // every call that ran was paid, and from what was there: the journal and the usage agree
      expect(rows.reduce((n, r) => n + r.requests, 0)).toBe(ok);
      expect(Math.abs((200 - balance) / 1e6 - rows.reduce((s, r) => s + Number(r.cost), 0))).toBeLessThan(1e-6);
    } finally {
      await otherBackend.close();
      await other.close();
    }
  });

  it('16 callers at once, for a while: every call runs and is paid, no hold waits on a usage write nor the other way', async () => {
    // a hold locks the wallet, then its hold row; the usage write did the other way round, and
    // PostgreSQL ended one of them as a deadlock: a 500, or a batch of usage lost (calls served free)
    const u = await subscriber(t, 'network');
    const a = await deploy(u.id);
    const address = await credit(u.id, 1);
    router.delayMs = 2;
    const results = await Promise.allSettled(
      Array.from({ length: 16 }, async () => {
        for (let i = 0; i < 10; i++) await ask(a.key, { max_tokens: 5 });
      }),
    );
    router.delayMs = 0;
    expect(results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
    await t.platform.services.ai.usage.flush();
    const rows = await t.database.db.kysely.selectFrom('ai_usage').select(['cost', 'requests']).where('user_id', '=', u.id).execute();
    expect(rows.reduce((n, r) => n + r.requests, 0)).toBe(160);
    const spent = 1_000_000 - (await balanceOf(address));
    expect(Math.abs(spent / 1e6 - rows.reduce((s, r) => s + Number(r.cost), 0))).toBeLessThan(1e-6);
  }, 60_000);

  it("POST /api/ai/chat for a platform user is billed to that user's balance", async () => {
    const u = await subscriber(t, 'network');
    const chat = () =>
      t.backend.inject({
        method: 'POST',
        url: '/api/ai/chat',
        headers: { ...bearer(t), 'x-user-id': u.id },
        payload: { messages: [{ role: 'user', content: 'hi' }], model: 'openai/gpt-4o-mini', max_tokens: 5 },
      });
    const refused = await chat();
    expect(refused.statusCode).toBe(402);
    expect(refused.json()).toMatchObject({ code: 'BALANCE_TOO_LOW' });
    const address = await credit(u.id, 0.01);
    expect((await chat()).statusCode).toBe(200);
    await t.platform.services.ai.usage.flush();
    const journal = await t.database.db.kysely
      .selectFrom('ledger_entries')
      .select('wallet_delta')
      .where('address', '=', address)
      .where('source', '=', 'ai_usage')
      .execute();
    // $0.0000045 crossed 4 whole micro-dollars of the running total
    expect(journal.reduce((s, r) => s - Number(r.wallet_delta), 0)).toBe(4);
  });
});

describe('every model has a price, or says it has none', () => {
  it('an unpriced model is refused with a sentence naming MODEL_PRICES; never served free', async () => {
    const u = await subscriber(t, 'network');
    const a = await deploy(u.id);
    await credit(u.id, 1);
    const err = (await ask(a.key, { model: 'custom/house-model' }).catch((e: unknown) => e)) as APIError;
    expect(err.status).toBe(403);
    expect(err.message).toContain('has no price, so it cannot be paid from the balance');
    expect(err.message).toContain('MODEL_PRICES');
    expect(custom.requests).toHaveLength(0);
  });

  it('a price on the admin page makes it billable at that price', async () => {
    const u = await subscriber(t, 'network');
    const a = await deploy(u.id);
    const address = await credit(u.id, 1);
    await t.platform.services.ai.prices.set({ id: u.id, isAdmin: true }, 'custom/house-model', { input: 1, output: 2 });
    try {
      await ask(a.key, { model: 'custom/house-model', max_tokens: 5 });
      await t.platform.services.ai.usage.flush();
      const row = await t.database.db.kysely
        .selectFrom('ai_usage')
        .select(['cost', 'priced'])
        .where('user_id', '=', u.id)
        .where('model', '=', 'custom/house-model')
        .executeTakeFirstOrThrow();
      expect(row.priced).toBe(true);
      expect(Number(row.cost)).toBeCloseTo(FAKE_USAGE.prompt_tokens * 1e-6 + FAKE_USAGE.completion_tokens * 2e-6, 12);
      expect(await balanceOf(address)).toBeLessThan(1_000_000);
    } finally {
      await t.platform.services.ai.prices.remove({ id: u.id, isAdmin: true }, 'custom/house-model');
    }
  });
});
