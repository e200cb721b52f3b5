/**
 * Usage per agent (docs/agents.md "Usage and budgets"; §4.9 usage log, §4.7 agents): every model
 * call an agent makes through the platform's AI gateway (its own apk_ key, streamed or not) is
 * usage of its owner with its agent id; GET /api/usage lists it per agent (the caller's agents
 * only, row-level security) and GET /api/agents/:id/usage shows one agent (owner only, 404
 * otherwise). The official `openai` client talks to the gateway over real sockets; the provider is
 * the local fake.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL_GATEWAY_PATH } from '../../src/config/env.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { FAKE_USAGE, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';

const ROUTER_KEY = 'router-secret-key-of-the-operator';
/** openai/gpt-4o-mini: $0.15 and $0.60 per million tokens (catalog.ts), FAKE_USAGE per call */
const CALL_COST = FAKE_USAGE.prompt_tokens * 0.15e-6 + FAKE_USAGE.completion_tokens * 0.6e-6;

let t: AgentsTestPlatform;
let router: FakeOpenAi;
let gateway: string;
let alice: Awaited<ReturnType<typeof subscriber>>;
let bob: Awaited<ReturnType<typeof subscriber>>;
let aliceAgent: { agentId: string; key: string };
let aliceOther: { agentId: string; key: string };
let bobAgent: { agentId: string; key: string };

async function deploy(userId: string, name: string) {
  const res = await t.backend.inject({
    method: 'POST',
    url: '/api/deployments',
    headers: bearer(t),
    payload: { userId, name, plan: 'network', model: 'openai/gpt-4o-mini' },
  });
  expect(res.statusCode, res.body).toBe(202);
  const agentId = res.json().agent.id as string;
  const spec = await eventually(async () => t.driver.deploys.findLast((s) => s.agentId === agentId));
  return { agentId, key: spec.platformApiKey as string };
}

const client = (key: string) => new OpenAI({ apiKey: key, baseURL: gateway, maxRetries: 0 });
const ask = (key: string) =>
  client(key).chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
async function askStreaming(key: string) {
  const stream = await client(key).chat.completions.create({
    model: 'openai/gpt-4o-mini',
    messages: [{ role: 'user', content: 'stream please' }],
    stream: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  return text;
}
const get = (cookie: string | undefined, url: string) => t.web.inject({ method: 'GET', url, headers: cookie ? { cookie } : {} });

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: ROUTER_KEY });
  t = await startAgentsPlatform({
    env: { ROUTER_API_KEY: ROUTER_KEY, ROUTER_BASE_URL: router.url, AGENT_GATEWAY_RATE_LIMIT: '1000' },
  });
  gateway = `${t.backendUrl}${MODEL_GATEWAY_PATH}`;
  alice = await subscriber(t, 'network');
  bob = await subscriber(t, 'network');
  aliceAgent = await deploy(alice.id, 'Alice researcher');
  aliceOther = await deploy(alice.id, 'Alice writer');
  bobAgent = await deploy(bob.id, 'Bob secret agent');

  // alice's first agent: two plain calls and a streamed one; her second: one; bob's: three
  await ask(aliceAgent.key);
  await ask(aliceAgent.key);
  expect(await askStreaming(aliceAgent.key)).toContain('stream please');
  await ask(aliceOther.key);
  for (let i = 0; i < 3; i++) await ask(bobAgent.key);
  await t.platform.services.ai.usage.flush();
});
afterAll(async () => {
  await t?.close();
  await router?.close();
});

describe('every gateway call is usage with its agent', () => {
  it('plain and streamed calls are recorded with the agent id, the owner and the cost', async () => {
    const rows = await t.database.db.kysely
      .selectFrom('ai_usage')
      .select(['user_id', 'agent_id', 'model', 'requests', 'total_tokens', 'cost'])
      .where('agent_id', '=', aliceAgent.agentId)
      .execute();
    // a row holds the calls of one window with the same caller, agent, model and day (migration 200)
    expect(rows.reduce((n, r) => n + r.requests, 0)).toBe(3);
    for (const r of rows) {
      expect(r.user_id).toBe(alice.id);
      expect(r.model).toBe('openai/gpt-4o-mini');
      expect(r.total_tokens).toBe(r.requests * FAKE_USAGE.total_tokens);
      expect(Number(r.cost)).toBeCloseTo(r.requests * CALL_COST, 12);
    }
    // the per-agent monthly rollup the budget check reads agrees with the rows
    const rollup = await t.database.db.kysely
      .selectFrom('ai_usage_agent_monthly')
      .selectAll()
      .where('agent_id', '=', aliceAgent.agentId)
      .executeTakeFirstOrThrow();
    expect(Number(rollup.requests)).toBe(3);
    expect(Number(rollup.total_tokens)).toBe(3 * FAKE_USAGE.total_tokens);
  });
});

describe('GET /api/usage byAgent', () => {
  it("lists the caller's agents with their names, most expensive first, and never another user's", async () => {
    const res = await get(alice.cookie, '/api/usage?days=7');
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.byAgent).toEqual([
      {
        agentId: aliceAgent.agentId,
        name: 'Alice researcher',
        requests: 3,
        promptTokens: 3 * FAKE_USAGE.prompt_tokens,
        completionTokens: 3 * FAKE_USAGE.completion_tokens,
        totalTokens: 3 * FAKE_USAGE.total_tokens,
        cost: Math.round(3 * CALL_COST * 1e6) / 1e6,
        unpricedRequests: 0,
      },
      expect.objectContaining({ agentId: aliceOther.agentId, name: 'Alice writer', requests: 1 }),
    ]);
    expect(body.totals.requests).toBe(4);
    expect(res.body).not.toContain(bobAgent.agentId);
    expect(res.body).not.toContain('Bob secret agent');

    const bobs = (await get(bob.cookie, '/api/usage')).json();
    expect(bobs.byAgent).toEqual([expect.objectContaining({ agentId: bobAgent.agentId, name: 'Bob secret agent', requests: 3 })]);
  });

  it('a user without agents gets an empty list; no session is 401', async () => {
    const carol = await subscriber(t, 'solo');
    expect((await get(carol.cookie, '/api/usage')).json().byAgent).toEqual([]);
    expect((await get(undefined, '/api/usage')).statusCode).toBe(401);
  });
});

describe('GET /api/agents/:id/usage', () => {
  it("the owner sees the agent's own totals, days, models and budget", async () => {
    const res = await get(alice.cookie, `/api/agents/${aliceAgent.agentId}/usage?days=3`);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.days).toBe(3);
    expect(body.daily).toHaveLength(3);
    expect(body.totals).toMatchObject({ requests: 3, totalTokens: 3 * FAKE_USAGE.total_tokens });
    expect(body.daily.at(-1)).toMatchObject({ date: new Date().toISOString().slice(0, 10), requests: 3 });
    expect(body.byModel).toEqual([expect.objectContaining({ model: 'openai/gpt-4o-mini', requests: 3 })]);
    expect(body.byAgent).toBeUndefined();
    const now = new Date();
    expect(body.budget).toEqual({
      monthlyBudgetUsd: null,
      monthToDateUsd: Math.round(3 * CALL_COST * 1e6) / 1e6,
      exceeded: false,
      periodStart: `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}-01`,
    });
  });

  it("another user's agent and an unknown id are 404 (nothing of it leaks); no session is 401; bad days 400", async () => {
    const other = await get(bob.cookie, `/api/agents/${aliceAgent.agentId}/usage`);
    expect(other.statusCode).toBe(404);
    expect(other.json()).toEqual({ error: 'Agent not found' });
    expect((await get(alice.cookie, '/api/agents/a0000000000000000000/usage')).statusCode).toBe(404);
    expect((await get(undefined, `/api/agents/${aliceAgent.agentId}/usage`)).statusCode).toBe(401);
    const bad = await get(alice.cookie, `/api/agents/${aliceAgent.agentId}/usage?days=0`);
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toContain('days must be 1 to 90');
  });
});
