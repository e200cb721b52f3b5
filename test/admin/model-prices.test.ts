/**
 * The admin page's model prices (docs/admin.md "Model prices", docs/payments.md "Model calls from
 * the balance"): GET lists every model with the price in force and its source (catalogue,
 * MODEL_PRICES, the admin page, none), PUT sets a price that wins and applies to the next call at
 * once, DELETE removes it; each change is recorded with its admin in an append-only table. With
 * AI_BILLING=balance an unpriced model is refused with a sentence naming MODEL_PRICES and the admin
 * page. Admins only. Through the HTTP API, an agent's model calls on the official `openai` client.
 * With REDIS_URL, a price set in one process applies in another at once.
 */
import { sql } from 'kysely';
import OpenAI, { type APIError } from 'openai';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelPrice } from '../../src/config/env.ts';
import { MODEL_GATEWAY_PATH } from '../../src/config/env.ts';
import { createModelPrices } from '../../src/domains/ai/model-prices.service.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { FAKE_USAGE, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { signUp } from '../helpers/platform.ts';

const ROUTER_KEY = 'router-secret-key-of-the-operator';
const HOUSE = 'custom/house-model';

let t: AgentsTestPlatform;
let router: FakeOpenAi;
let custom: FakeOpenAi;
let admin: Awaited<ReturnType<typeof signUp>>;

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
      MODEL_PRICES: JSON.stringify({ 'router/set-by-setting': { input: 3, output: 4 } }),
      AGENT_GATEWAY_RATE_LIMIT: '1000',
      AI_RATE_LIMIT: '1000',
    },
  });
  admin = await signUp(t.web);
  await t.platform.services.admin.setAdminByEmail(admin.email, true);
});
afterAll(async () => {
  await t?.close();
  await router?.close();
  await custom?.close();
});

type PriceView = { modelId: string; input: number | null; output: number | null; source: string; updatedBy: string | null };
type PricesBody = { billing: string; models: PriceView[]; changes: { modelId: string; input: number | null; by: string | null }[] };

const prices = (method: 'GET' | 'PUT' | 'DELETE', opts: { cookie?: string; body?: unknown; query?: string } = {}) =>
  t.web.inject({
    method,
    url: `/api/admin/model-prices${opts.query ? `?${opts.query}` : ''}`,
    headers: opts.cookie === '' ? {} : { cookie: opts.cookie ?? admin.cookie },
    ...(opts.body !== undefined ? { payload: opts.body as object } : {}),
  });
const model = (body: PricesBody, id: string) => body.models.find((m) => m.modelId === id);

/** An agent on the billed platform with $1 of credit, and its model key. */
async function billedAgent() {
  const u = await subscriber(t, 'network');
  const res = await t.backend.inject({
    method: 'POST',
    url: '/api/deployments',
    headers: bearer(t),
    payload: { userId: u.id, name: 'Priced', plan: 'network', model: 'openai/gpt-4o-mini' },
  });
  expect(res.statusCode, res.body).toBe(202);
  const agentId = res.json().agent.id as string;
  const spec = await eventually(async () => t.driver.deploys.findLast((s) => s.agentId === agentId));
  const address = (await t.platform.services.sessionWallet.ensureAddress(u.id)).toLowerCase();
  await t.platform.services.ledger.credit({ address, amountMicros: 1_000_000, eventId: `test-credit-${u.id}`, source: 'card_top_up' });
  const client = new OpenAI({ apiKey: spec.platformApiKey as string, baseURL: `${t.backendUrl}${MODEL_GATEWAY_PATH}`, maxRetries: 0 });
  return {
    userId: u.id,
    ask: () => client.chat.completions.create({ model: HOUSE, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }),
  };
}

describe('GET /api/admin/model-prices', () => {
  it('lists every model with its price in force and its source: catalogue, MODEL_PRICES, none', async () => {
    const res = await prices('GET');
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as PricesBody;
    expect(body.billing).toBe('balance');
    expect(model(body, 'openai/gpt-4o-mini')).toMatchObject({ input: 0.15, output: 0.6, source: 'catalogue', updatedBy: null });
    expect(model(body, HOUSE)).toMatchObject({ input: null, output: null, source: 'none' });
    // a model only MODEL_PRICES names is listed too
    expect(model(body, 'router/set-by-setting')).toMatchObject({ input: 3, output: 4, source: 'setting', name: null });
  });

  it('401 signed out, 403 ADMIN_REQUIRED for another user, on every method; nothing changes', async () => {
    const u = await signUp(t.web);
    for (const [method, body, query] of [
      ['GET', undefined, undefined],
      ['PUT', { modelId: HOUSE, input: 1, output: 1 }, undefined],
      ['DELETE', undefined, `modelId=${HOUSE}`],
    ] as const) {
      expect((await prices(method, { cookie: '', body, query })).statusCode).toBe(401);
      const refused = await prices(method, { cookie: u.cookie, body, query });
      expect([refused.statusCode, refused.json().code]).toEqual([403, 'ADMIN_REQUIRED']);
    }
    expect(model((await prices('GET')).json(), HOUSE)?.source).toBe('none');
  });

  it('400 for a bad price or model id, 404 removing a price the page never set', async () => {
    for (const body of [
      { modelId: HOUSE, input: -1, output: 1 },
      { modelId: HOUSE, input: 1, output: 100_001 },
      { modelId: HOUSE, input: '1', output: 1 },
      { modelId: '', input: 1, output: 1 },
      { modelId: 'x'.repeat(201), input: 1, output: 1 },
      { input: 1, output: 1 },
    ]) {
      const res = await prices('PUT', { body });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error).toMatch(/^Invalid (input|output|modelId)/);
    }
    const missing = await prices('DELETE', { query: 'modelId=router/never-priced' });
    expect([missing.statusCode, missing.json().error]).toEqual([404, 'No price set for this model on the admin page']);
  });
});

describe('an admin price applies at once, and says who set it', () => {
  it('unpriced: refused naming MODEL_PRICES and the admin page → PUT a price: the next call is paid at it → DELETE: refused again', async () => {
    const agent = await billedAgent();
    const refusal = async () => (await agent.ask().catch((e: unknown) => e)) as APIError;
    const before = await refusal();
    expect(before.status).toBe(403);
    expect(before.message).toContain(`Model ${HOUSE} has no price, so it cannot be paid from the balance`);
    expect(before.message).toContain('MODEL_PRICES or on the admin page (Model prices)');
    expect(custom.requests).toHaveLength(0);

    const set = await prices('PUT', { body: { modelId: HOUSE, input: 1, output: 2 } });
    expect(set.statusCode, set.body).toBe(200);
    expect(model(set.json(), HOUSE)).toMatchObject({ input: 1, output: 2, source: 'admin', updatedBy: admin.email });

    // no wait: the next call is priced
    expect((await agent.ask()).choices[0]?.message.content).toBeTruthy();
    await t.platform.services.ai.usage.flush();
    const row = await t.database.db.kysely
      .selectFrom('ai_usage')
      .select(['cost', 'priced'])
      .where('user_id', '=', agent.userId)
      .where('model', '=', HOUSE)
      .executeTakeFirstOrThrow();
    expect(row.priced).toBe(true);
    expect(Number(row.cost)).toBeCloseTo(FAKE_USAGE.prompt_tokens * 1e-6 + FAKE_USAGE.completion_tokens * 2e-6, 12);

    // an admin price wins over the catalogue's
    const over = await prices('PUT', { body: { modelId: 'openai/gpt-4o-mini', input: 0.2, output: 0.7 } });
    expect(model(over.json(), 'openai/gpt-4o-mini')).toMatchObject({ input: 0.2, output: 0.7, source: 'admin' });

    const removed = await prices('DELETE', { query: `modelId=${encodeURIComponent(HOUSE)}` });
    expect(removed.statusCode, removed.body).toBe(200);
    expect(model(removed.json(), HOUSE)).toMatchObject({ input: null, source: 'none', updatedBy: null });
    expect((await refusal()).status).toBe(403);
    const back = await prices('DELETE', { query: 'modelId=openai/gpt-4o-mini' });
    expect(model(back.json(), 'openai/gpt-4o-mini')).toMatchObject({ input: 0.15, output: 0.6, source: 'catalogue' });

    // every change, newest first, with its admin
    const changes = (back.json() as PricesBody).changes.slice(0, 4);
    expect(changes.map((c) => [c.modelId, c.input, c.by])).toEqual([
      ['openai/gpt-4o-mini', null, admin.email],
      [HOUSE, null, admin.email],
      ['openai/gpt-4o-mini', 0.2, admin.email],
      [HOUSE, 1, admin.email],
    ]);
  });

  it('the record of changes is append-only', async () => {
    await prices('PUT', { body: { modelId: 'router/audited', input: 1, output: 1 } });
    await expect(sql`UPDATE model_price_changes SET input_per_m = 0`.execute(t.database.db.kysely)).rejects.toThrow(/append-only/);
    await expect(sql`DELETE FROM model_price_changes`.execute(t.database.db.kysely)).rejects.toThrow(/append-only/);
  });
});

describe.skipIf(!process.env.REDIS_URL)('across replicas (REDIS_URL)', () => {
  it('a price set in one process applies in another at once, not after the 30 s reload', async () => {
    const config = { MODEL_PRICES: {}, REDIS_URL: process.env.REDIS_URL, REDIS_TIMEOUT_MS: 500 };
    /** one replica's prices service over the shared database, with what its catalogue was last given */
    const replica = () => {
      const seen: Record<string, ModelPrice>[] = [];
      const prices = createModelPrices({
        db: t.database.db,
        config,
        catalog: { setPrices: (p) => seen.push(p), list: () => [] },
        logger: pino({ level: 'silent' }),
      });
      return { prices, last: () => seen.at(-1) ?? {} };
    };
    const [a, b] = [replica(), replica()];
    try {
      await new Promise((r) => setTimeout(r, 300)); // their subscriptions are up
      await a.prices.set({ id: admin.id, isAdmin: true }, 'router/replicated', { input: 7, output: 8 });
      expect(a.last()['router/replicated']).toEqual({ input: 7, output: 8 });
      await eventually(async () => b.last()['router/replicated']?.input === 7, 2_000);
      await b.prices.remove({ id: admin.id, isAdmin: true }, 'router/replicated');
      await eventually(async () => a.last()['router/replicated'] === undefined, 2_000);
    } finally {
      await a.prices.close();
      await b.prices.close();
    }
  });
});
