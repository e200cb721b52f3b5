/**
 * §4.9 AI routes against local fake upstreams (real HTTP): every status and body, plan rules,
 * fallback, algorithm mode, Anthropic translation, usage logging and quotas.
 */

import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ALGORITHM_SYSTEM_PROMPT } from '../../src/domains/ai/plan.rules.ts';
import type { UsageStore } from '../../src/domains/ai/usage-store.service.ts';
import { type FakeAnthropic, startFakeAnthropic } from '../fakes/anthropic-upstream.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const KEY = 'test-internal-key';
const auth = { authorization: `Bearer ${KEY}` };
const plan = (p: string, extra: Record<string, string> = {}) => ({
  ...auth,
  'x-user-plan': p,
  'x-stripe-subscription-id': 'sub_123',
  ...extra,
});

let router: FakeOpenAi;
let anthropic: FakeAnthropic;
let t: TestPlatform;

const aiEnv = () => ({
  ROUTER_API_KEY: 'router-key',
  ROUTER_BASE_URL: router.url,
  ANTHROPIC_API_KEY: 'anthropic-key',
  ANTHROPIC_BASE_URL: anthropic.url,
  ADMIN_EMAILS: 'Boss@Example.com',
  AI_RATE_LIMIT: '10000',
});

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: 'router-key' });
  anthropic = await startFakeAnthropic({ apiKey: 'anthropic-key' });
  t = await startTestPlatform(aiEnv());
});
afterAll(async () => {
  await t?.close();
  await router?.close();
  await anthropic?.close();
});
beforeEach(() => {
  router.reset();
  anthropic.reset();
});

const chat = (headers: Record<string, string>, payload: unknown) =>
  t.backend.inject({ method: 'POST', url: '/api/ai/chat', headers, payload: payload as object });
const hello = { messages: [{ role: 'user', content: 'What is 2+2?' }] };

describe('bearer key on /api/ai/* (§5)', () => {
  it.each([
    ['GET', '/api/ai/health'],
    ['GET', '/api/ai/models'],
    ['GET', '/api/ai/models/router'],
    ['POST', '/api/ai/models/select'],
    ['POST', '/api/ai/chat'],
    ['POST', '/api/ai/estimate-cost'],
  ] as const)('%s %s: 401 without a key, 401 without Bearer, 403 for a wrong key', async (method, url) => {
    const none = await t.backend.inject({ method, url });
    expect(none.statusCode).toBe(401);
    expect(none.json()).toEqual({ error: 'Unauthorized' });
    const noPrefix = await t.backend.inject({ method, url, headers: { authorization: KEY } });
    expect(noPrefix.statusCode).toBe(401);
    const wrong = await t.backend.inject({ method, url, headers: { authorization: 'Bearer nope' } });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.json()).toEqual({ error: 'Forbidden' });
  });

  it('500 Server misconfigured when INTERNAL_API_KEY is unset', async () => {
    await withTestPlatform({ ...aiEnv(), INTERNAL_API_KEY: '' }, async (p) => {
      const res = await p.backend.inject({ method: 'GET', url: '/api/ai/health', headers: auth });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ error: 'Server misconfigured' });
    });
  });
});

describe('GET /api/ai/health', () => {
  it('healthy with the router configured', async () => {
    const res = await t.backend.inject({ method: 'GET', url: '/api/ai/health', headers: auth });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.status).toBe('healthy');
    expect(body.providers).toMatchObject({ router: true, anthropic: true, openai: false, groq: false, gemini: false, custom: false });
    expect(Number.isNaN(Date.parse(body.timestamp))).toBe(false);
  });

  it('degraded without ROUTER_API_KEY; 503 {status:error} when the usage store fails', async () => {
    const failing: UsageStore = {
      record() {},
      release() {},
      written: () => undefined,
      monthlyTokens: async () => 0,
      pendingAgentCost: () => 0,
      pendingKeyCost: () => 0,
      flush: async () => {},
      ping: async () => {
        throw new Error('db down');
      },
      close: async () => {},
    };
    const degraded = await startTestPlatform({ ANTHROPIC_API_KEY: 'k' });
    const broken = await startTestPlatform(aiEnv(), { aiUsageStore: failing });
    try {
      const d = await degraded.backend.inject({ method: 'GET', url: '/api/ai/health', headers: auth });
      expect(d.statusCode).toBe(200);
      expect(d.json()).toMatchObject({ status: 'degraded', providers: { router: false } });
      const b = await broken.backend.inject({ method: 'GET', url: '/api/ai/health', headers: auth });
      expect(b.statusCode).toBe(503);
      expect(b.json()).toEqual({ status: 'error', error: expect.any(String) });
    } finally {
      await degraded.close();
      await broken.close();
    }
  });
});

describe('models', () => {
  it('GET /api/ai/models lists the catalog with the §4.9 fields', async () => {
    const res = await t.backend.inject({ method: 'GET', url: '/api/ai/models', headers: auth });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.router).toBe(true);
    expect(body.count).toBe(body.models.length);
    for (const m of body.models) {
      expect(Object.keys(m).sort()).toEqual([
        'available',
        'contextWindow',
        'description',
        'id',
        'inputCost',
        'name',
        'outputCost',
        'provider',
        'tags',
      ]);
      expect(m.id).toMatch(/^[^/]+\/.+$/);
    }
    const byId = Object.fromEntries(body.models.map((m: any) => [m.id, m]));
    expect(byId['openai/gpt-4o-mini']).toMatchObject({ provider: 'router', available: true, inputCost: 0.15 / 1e6 });
    expect(byId['anthropic/claude-sonnet-4-5']).toMatchObject({ provider: 'anthropic', available: true });
    expect(byId['gemini/gemini-2.5-flash']).toMatchObject({ provider: 'gemini', available: false });
    expect(body.models.filter((m: any) => m.provider === 'custom')).toHaveLength(1);
  });

  it("?refresh=true merges the router's /models (prices, names, new models)", async () => {
    router.models = [
      {
        id: 'openai/gpt-4o-mini',
        name: 'GPT-4o mini (router)',
        pricing: { prompt: '0.0000002', completion: '0.0000008' },
        context_length: 100_000,
      },
      { id: 'newvendor/new-model', name: 'New Model', pricing: { prompt: '0.000001', completion: '0.000002' }, context_length: 32_000 },
    ];
    const res = await t.backend.inject({ method: 'GET', url: '/api/ai/models?refresh=true', headers: auth });
    expect(res.statusCode).toBe(200);
    expect(router.requests.some((r) => r.method === 'GET' && r.path === '/v1/models')).toBe(true);
    const byId = Object.fromEntries(res.json().models.map((m: any) => [m.id, m]));
    expect(byId['openai/gpt-4o-mini']).toMatchObject({
      name: 'GPT-4o mini (router)',
      inputCost: 0.0000002,
      outputCost: 0.0000008,
      contextWindow: 100_000,
    });
    expect(byId['newvendor/new-model']).toMatchObject({ provider: 'router', available: true, tags: [] });
  });

  it('GET /api/ai/models/:provider filters by provider or vendor', async () => {
    const r = await t.backend.inject({ method: 'GET', url: '/api/ai/models/anthropic', headers: auth });
    expect(r.statusCode).toBe(200);
    const body = r.json();
    expect(body.provider).toBe('anthropic');
    expect(body.count).toBe(body.models.length);
    const ids = body.models.map((m: any) => m.id);
    expect(ids).toContain('anthropic/claude-sonnet-4-5');
    expect(ids).toContain('anthropic/claude-sonnet-4.5');
    const groq = (await t.backend.inject({ method: 'GET', url: '/api/ai/models/groq', headers: auth })).json();
    expect(groq.models.every((m: any) => m.provider === 'groq')).toBe(true);
    const none = await t.backend.inject({ method: 'GET', url: '/api/ai/models/nobody', headers: auth });
    expect(none.json()).toMatchObject({ provider: 'nobody', models: [], count: 0 });
  });
});

describe('plan middleware (§4.9/§5)', () => {
  it('402 PLAN_REQUIRED for a missing or unknown plan, SUBSCRIPTION_REQUIRED without the subscription id', async () => {
    for (const url of ['/api/ai/chat', '/api/ai/models/select', '/api/ai/estimate-cost']) {
      const missing = await t.backend.inject({ method: 'POST', url, headers: auth, payload: {} });
      expect(missing.statusCode).toBe(402);
      expect(missing.json()).toEqual({ success: false, error: expect.any(String), code: 'PLAN_REQUIRED' });
      const unknown = await t.backend.inject({
        method: 'POST',
        url,
        headers: { ...auth, 'x-user-plan': 'gold', 'x-stripe-subscription-id': 's' },
        payload: {},
      });
      expect(unknown.json().code).toBe('PLAN_REQUIRED');
      const noSub = await t.backend.inject({ method: 'POST', url, headers: { ...auth, 'x-user-plan': 'solo' }, payload: {} });
      expect(noSub.statusCode).toBe(402);
      expect(noSub.json()).toEqual({ success: false, error: expect.any(String), code: 'SUBSCRIPTION_REQUIRED' });
    }
  });

  it('admin email (case-insensitive) bypasses plan and subscription and gets every model', async () => {
    const res = await chat({ ...auth, 'x-user-email': 'boss@example.COM' }, { ...hello, model: 'anthropic/claude-opus-4.1' });
    expect(res.statusCode).toBe(200);
    expect(res.json().model).toBe('anthropic/claude-opus-4.1');
  });

  it.each([
    ['solo', 3],
    ['collective', 5],
    ['label', 7],
  ])('403 MODEL_RESTRICTED for %s outside its %i models', async (p, n) => {
    const res = await chat(plan(p), { ...hello, model: 'x-ai/grok-4' });
    expect(res.statusCode).toBe(403);
    const body = res.json();
    expect(body).toMatchObject({ success: false, code: 'MODEL_RESTRICTED', error: expect.any(String) });
    expect(body.allowedModels).toHaveLength(n);
    expect(body.allowedModels[0]).toBe('openai/gpt-4o-mini');
    const ok = await chat(plan(p), { ...hello, model: body.allowedModels[n - 1] });
    expect(ok.statusCode).toBe(200);
  });

  it('network may use any model', async () => {
    expect((await chat(plan('network'), { ...hello, model: 'x-ai/grok-4' })).statusCode).toBe(200);
  });
});

describe('POST /api/ai/models/select', () => {
  const select = (p: string, body?: object) =>
    t.backend.inject({ method: 'POST', url: '/api/ai/models/select', headers: plan(p), ...(body ? { payload: body } : {}) });

  it('applies the §4.9 task tags within the plan; default general', async () => {
    const general = await select('solo');
    expect(general.statusCode, general.body).toBe(200);
    expect(general.json()).toMatchObject({ model: { id: 'openai/gpt-4o-mini', provider: 'router' }, taskType: 'general' });
    expect((await select('solo', { taskType: 'coding' })).json().model.id).toBe('deepseek/deepseek-chat');
    expect((await select('solo', { taskType: 'long' })).json().model.id).toBe('google/gemini-2.5-flash');
    expect((await select('solo', { taskType: 'analysis' })).json().model.id).toBe('google/gemini-2.5-flash');
    // no creative model among solo's three: the first available
    expect((await select('solo', { taskType: 'creative' })).json().model.id).toBe('openai/gpt-4o-mini');
    expect((await select('network', { taskType: 'creative' })).json().model.id).toBe('meta-llama/llama-3.3-70b-instruct');
  });

  it('400 for an unknown taskType; 404 when no router model is available', async () => {
    const bad = await select('solo', { taskType: 'poetry' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatch(/taskType/);
    await withTestPlatform({ ANTHROPIC_API_KEY: 'k' }, async (p) => {
      const res = await p.backend.inject({ method: 'POST', url: '/api/ai/models/select', headers: plan('network'), payload: {} });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: 'No model available' });
    });
  });
});

describe('POST /api/ai/estimate-cost', () => {
  it('multiplies tokens by the per-token costs', async () => {
    const res = await t.backend.inject({
      method: 'POST',
      url: '/api/ai/estimate-cost',
      headers: plan('solo'),
      payload: { model: 'anthropic/claude-sonnet-4-5', inputTokens: 1000, outputTokens: 2000 },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      model: 'anthropic/claude-sonnet-4-5',
      inputTokens: 1000,
      outputTokens: 2000,
      estimatedCost: 0.033,
      currency: 'USD',
      timestamp: expect.any(String),
    });
  });

  it('400 when a field is missing or the model is unknown', async () => {
    for (const payload of [
      {},
      { model: 'openai/gpt-4o-mini' },
      { model: 'openai/gpt-4o-mini', inputTokens: 1 },
      { inputTokens: 1, outputTokens: 1 },
    ]) {
      const res = await t.backend.inject({ method: 'POST', url: '/api/ai/estimate-cost', headers: plan('solo'), payload });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('Model, inputTokens and outputTokens are required');
    }
    const unknown = await t.backend.inject({
      method: 'POST',
      url: '/api/ai/estimate-cost',
      headers: plan('solo'),
      payload: { model: 'no/such', inputTokens: 1, outputTokens: 1 },
    });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json()).toEqual({ error: 'Unknown model' });
  });
});

describe('POST /api/ai/chat', () => {
  it('answers in the §4.9 shape and sends the router what the client asked', async () => {
    const res = await chat(plan('solo', { 'x-user-id': 'user-42' }), {
      ...hello,
      model: 'deepseek/deepseek-chat',
      temperature: 0.3,
      top_p: 0.9,
      max_tokens: 50,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      id: 'chatcmpl-fake',
      model: 'deepseek/deepseek-chat',
      provider: 'router',
      message: { role: 'assistant', content: 'Echo: What is 2+2?' },
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      timestamp: expect.any(String),
    });
    const sent = router.requests.at(-1)!;
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe('Bearer router-key');
    expect(sent.body).toEqual({ model: 'deepseek/deepseek-chat', messages: hello.messages, temperature: 0.3, top_p: 0.9, max_tokens: 50 });
  });

  it('auto-selects from taskType when model is omitted', async () => {
    const res = await chat(plan('solo'), { ...hello, taskType: 'coding' });
    expect(res.json().model).toBe('deepseek/deepseek-chat');
  });

  it("falls back to the provider's fallback model and reports the model that served", async () => {
    router.failModels.add('deepseek/deepseek-chat');
    const res = await chat(plan('solo'), { ...hello, model: 'deepseek/deepseek-chat' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ model: 'google/gemini-2.5-flash', provider: 'router' });
    expect(router.requests.map((r) => r.body.model)).toEqual(['deepseek/deepseek-chat', 'google/gemini-2.5-flash']);
  });

  it('500 when the primary and the fallback both fail', async () => {
    router.failModels.add('deepseek/deepseek-chat');
    router.failModels.add('google/gemini-2.5-flash');
    const res = await chat(plan('solo'), { ...hello, model: 'deepseek/deepseek-chat' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toMatchObject({ error: expect.any(String) });
  });

  it('404 for a model outside the catalog (network plan); 503 when its provider has no key', async () => {
    const res = await chat(plan('network'), { ...hello, model: 'nobody/nothing' });
    expect(res.statusCode).toBe(404);
    // the message names the models that exist (what the openai client shows)
    expect(res.json().error).toMatch(/^Model nobody\/nothing not found\. Models you can use: openai\/gpt-4o-mini, /);
    const gem = await chat(plan('network'), { ...hello, model: 'gemini/gemini-2.5-flash' });
    expect(gem.statusCode).toBe(503);
    expect(gem.json().code).toBe('PROVIDER_UNAVAILABLE');
  });

  it('Anthropic models go through the Messages API (x-api-key, anthropic-version, system field) and fall back', async () => {
    const res = await chat(plan('network'), {
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi Claude' },
      ],
      model: 'anthropic/claude-sonnet-4-5',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      model: 'anthropic/claude-sonnet-4-5',
      provider: 'anthropic',
      message: { role: 'assistant', content: 'Claude: Hi Claude' },
      usage: { prompt_tokens: 20, completion_tokens: 7, total_tokens: 27 },
    });
    const sent = anthropic.requests.at(-1)!;
    expect(sent.path).toBe('/v1/messages');
    expect(sent.headers['x-api-key']).toBe('anthropic-key');
    expect(sent.headers['anthropic-version']).toBe('2023-06-01');
    expect(sent.body).toMatchObject({
      model: 'claude-sonnet-4-5',
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Hi Claude' }],
    });

    anthropic.failModels.add('claude-sonnet-4-5');
    const fb = await chat(plan('network'), { ...hello, model: 'anthropic/claude-sonnet-4-5' });
    expect(fb.json()).toMatchObject({ model: 'anthropic/claude-haiku-4-5', provider: 'anthropic' });
  });

  it('algorithm mode prepends the 7-phase prompt; not when a system message has the phases; not for greetings', async () => {
    await chat(plan('solo'), { ...hello, algorithmMode: true });
    const injected = router.requests.at(-1)!.body.messages;
    expect(injected[0]).toEqual({ role: 'system', content: ALGORITHM_SYSTEM_PROMPT });
    for (const phase of ['Observe', 'Think', 'Plan', 'Build', 'Execute', 'Verify', 'Learn']) expect(injected[0].content).toContain(phase);
    expect(injected.slice(1)).toEqual(hello.messages);

    const own = [
      { role: 'system', content: 'Use Observe, Think, Plan, Build, Execute, Verify and Learn.' },
      { role: 'user', content: 'Design a cache' },
    ];
    await chat(plan('solo'), { messages: own, algorithmMode: true });
    expect(router.requests.at(-1)!.body.messages).toEqual(own);

    const greet = [{ role: 'user', content: 'Hello!' }];
    await chat(plan('solo'), { messages: greet, algorithmMode: true });
    expect(router.requests.at(-1)!.body.messages).toEqual(greet);

    await chat(plan('solo'), hello);
    expect(router.requests.at(-1)!.body.messages).toEqual(hello.messages);
  });

  it('logs usage per user and model with cost, and rolls it up per month', async () => {
    const user = `usage-${Date.now()}`;
    await chat(plan('solo', { 'x-user-id': user }), { ...hello, model: 'deepseek/deepseek-chat', agentId: 'agent-1' });
    await chat(plan('solo', { 'x-user-id': user }), { ...hello, model: 'deepseek/deepseek-chat' });
    await t.platform.services.ai.usage.flush();
    const rows = await t.database.db.kysely.selectFrom('ai_usage').selectAll().where('user_id', '=', user).orderBy('id').execute();
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({
      model: 'deepseek/deepseek-chat',
      provider: 'router',
      agent_id: 'agent-1',
      prompt_tokens: 10,
      completion_tokens: 5,
      total_tokens: 15,
    });
    expect(Number(rows[0]!.cost)).toBeCloseTo(10 * 0.27e-6 + 5 * 1.1e-6, 12);
    const monthly = await t.database.db.kysely.selectFrom('ai_usage_monthly').selectAll().where('user_id', '=', user).execute();
    expect(monthly).toHaveLength(1);
    expect(monthly[0]).toMatchObject({ model: 'deepseek/deepseek-chat', requests: 2, total_tokens: 30 });
    // anonymous by default (§5 header context)
    await chat(plan('solo'), hello);
    await t.platform.services.ai.usage.flush();
    const anon = await sql<{ n: number }>`select count(*)::int as n from ai_usage where user_id = 'anonymous'`.execute(
      t.database.db.kysely,
    );
    expect(anon.rows[0]!.n).toBeGreaterThan(0);
  });

  it('usage rows are invisible without a user context (row-level security)', async () => {
    const rows = await t.database.db.withoutUser((trx) => trx.selectFrom('ai_usage').selectAll().execute());
    expect(rows).toEqual([]);
  });
});

describe('token quotas (§4.9)', () => {
  it('recorded but not enforced by default; 429 QUOTA_EXCEEDED when AI_QUOTA_ENFORCE=true', async () => {
    const month = `${new Date().toISOString().slice(0, 7)}-01`;
    const seed = (db: TestPlatform['database']['db'], user: string) =>
      sql`insert into ai_usage_monthly (user_id, month, model, requests, total_tokens) values (${user}, ${month}::date, 'openai/gpt-4o-mini', 1, 2000000)`.execute(
        db.kysely,
      );
    await seed(t.database.db, 'heavy');
    expect((await chat(plan('solo', { 'x-user-id': 'heavy' }), hello)).statusCode).toBe(200);

    await withTestPlatform({ ...aiEnv(), AI_QUOTA_ENFORCE: 'true' }, async (p) => {
      await seed(p.database.db, 'heavy');
      const res = await p.backend.inject({
        method: 'POST',
        url: '/api/ai/chat',
        headers: plan('solo', { 'x-user-id': 'heavy' }),
        payload: hello,
      });
      expect(res.statusCode).toBe(429);
      expect(res.json()).toMatchObject({ error: expect.any(String), code: 'QUOTA_EXCEEDED' });
      // collective's quota is 6M: the same usage passes; network is unlimited
      const col = await p.backend.inject({
        method: 'POST',
        url: '/api/ai/chat',
        headers: plan('collective', { 'x-user-id': 'heavy' }),
        payload: hello,
      });
      expect(col.statusCode).toBe(200);
      const light = await p.backend.inject({
        method: 'POST',
        url: '/api/ai/chat',
        headers: plan('solo', { 'x-user-id': 'light' }),
        payload: hello,
      });
      expect(light.statusCode).toBe(200);
    });
  });
});

describe('bad input: 4xx JSON, never 5xx', () => {
  const cases: [string, string, Record<string, string>, unknown][] = [
    ['POST', '/api/ai/chat', plan('network'), {}],
    ['POST', '/api/ai/chat', plan('network'), { messages: [] }],
    ['POST', '/api/ai/chat', plan('network'), { messages: 'hi' }],
    ['POST', '/api/ai/chat', plan('network'), { messages: [null] }],
    ['POST', '/api/ai/chat', plan('network'), { messages: [{ role: 'robot', content: 'x' }] }],
    ['POST', '/api/ai/chat', plan('network'), { messages: [{ role: 'user', content: 42 }] }],
    ['POST', '/api/ai/chat', plan('network'), { messages: [{ role: 'user' }] }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, model: 42 }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, model: '' }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, model: 'x'.repeat(5000) }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, temperature: 'hot' }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, temperature: 9 }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, top_p: -1 }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, max_tokens: 1.5 }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, max_tokens: 0 }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, algorithmMode: 'yes' }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, taskType: 'dance' }],
    ['POST', '/api/ai/chat', plan('network'), { ...hello, stream: 'true' }],
    ['POST', '/api/ai/chat', plan('network'), [1, 2, 3]],
    ['POST', '/api/ai/chat', plan('network'), '"just a string"'],
    ['POST', '/api/ai/estimate-cost', plan('solo'), { model: 'openai/gpt-4o-mini', inputTokens: -1, outputTokens: 1 }],
    ['POST', '/api/ai/estimate-cost', plan('solo'), { model: 'openai/gpt-4o-mini', inputTokens: '1', outputTokens: 1 }],
    ['POST', '/api/ai/estimate-cost', plan('solo'), { model: ['a'], inputTokens: 1, outputTokens: 1 }],
    ['POST', '/api/ai/models/select', plan('solo'), { taskType: 7 }],
    ['POST', '/api/ai/models/select', plan('solo'), []],
    ['GET', '/api/ai/models?refresh=maybe', auth, undefined],
    ['GET', `/api/ai/models/${'%00'}`, auth, undefined],
    ['GET', `/api/ai/models/${'a'.repeat(300)}`, auth, undefined],
  ];
  it.each(cases)('%s %s (%#)', async (method, url, headers, payload) => {
    const res = await t.backend.inject({
      method: method as 'GET',
      url,
      headers: { ...headers, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(payload !== undefined ? { payload: typeof payload === 'string' ? payload : JSON.stringify(payload) } : {}),
    });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(typeof res.json().error).toBe('string');
  });

  it('malformed JSON is a 400', async () => {
    const res = await t.backend.inject({
      method: 'POST',
      url: '/api/ai/chat',
      headers: { ...plan('solo'), 'content-type': 'application/json' },
      payload: '{"messages": [',
    });
    expect(res.statusCode).toBe(400);
  });
});
