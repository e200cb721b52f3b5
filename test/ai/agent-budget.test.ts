/**
 * Monthly budgets per agent (docs/agents.md "Usage and budgets"; §4.9 AI layer, §4.7 agents):
 * PUT /api/agents/:id/budget (owner; a number ≥ 0.000001 and ≤ 100000, or null), and the AI gateway's
 * refusal once the UTC month's cost and the calls in flight reached it: 429 in OpenAI's shape
 * (`insufficient_quota`, `budget_exceeded`) before the provider is contacted. Each call holds its
 * most possible cost while it runs (migration 205), so concurrent calls overshoot by at most one
 * call's hold, and usage stays exact under them. Real sockets, the official `openai` client, the
 * local fake provider.
 */
import { sql } from 'kysely';
import OpenAI, { RateLimitError } from 'openai';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { MODEL_GATEWAY_PATH } from '../../src/config/env.ts';
import { monthOf } from '../../src/domains/ai/ai.repo.ts';
import { createGateway } from '../../src/runtime/gateway.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { FAKE_USAGE, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';

const ROUTER_KEY = 'router-secret-key-of-the-operator';
/** openai/gpt-4o-mini: $0.15 and $0.60 per million tokens (catalog.ts): $0.0000045 per fake call */
const CALL_COST = FAKE_USAGE.prompt_tokens * 0.15e-6 + FAKE_USAGE.completion_tokens * 0.6e-6;

let t: AgentsTestPlatform;
let router: FakeOpenAi;
let gateway: string;
let owner: Awaited<ReturnType<typeof subscriber>>;
let stranger: Awaited<ReturnType<typeof subscriber>>;

async function deploy(userId: string) {
  const res = await t.backend.inject({
    method: 'POST',
    url: '/api/deployments',
    headers: bearer(t),
    payload: { userId, name: 'Budgeted', plan: 'network', model: 'openai/gpt-4o-mini' },
  });
  expect(res.statusCode, res.body).toBe(202);
  const agentId = res.json().agent.id as string;
  const spec = await eventually(async () => t.driver.deploys.findLast((s) => s.agentId === agentId));
  return { agentId, key: spec.platformApiKey as string };
}

const client = (key: string) => new OpenAI({ apiKey: key, baseURL: gateway, maxRetries: 0 });
const ask = (key: string) =>
  client(key).chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
const setBudget = (cookie: string | undefined, agentId: string, payload: unknown) =>
  t.web.inject({
    method: 'PUT',
    url: `/api/agents/${agentId}/budget`,
    headers: { ...(cookie ? { cookie } : {}), 'content-type': 'application/json' },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });
const usageOf = async (agentId: string) => {
  await t.platform.services.ai.usage.flush();
  return t.database.db.kysely.selectFrom('ai_usage').select(['cost', 'requests']).where('agent_id', '=', agentId).execute();
};
/** calls in usage rows: a row holds one or more calls of one window (migration 200) */
const callsIn = (rows: { requests: number }[]) => rows.reduce((n, r) => n + r.requests, 0);

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: ROUTER_KEY });
  t = await startAgentsPlatform({
    env: { ROUTER_API_KEY: ROUTER_KEY, ROUTER_BASE_URL: router.url, AGENT_GATEWAY_RATE_LIMIT: '1000' },
  });
  gateway = `${t.backendUrl}${MODEL_GATEWAY_PATH}`;
  owner = await subscriber(t, 'network');
  stranger = await subscriber(t, 'network');
});
afterAll(async () => {
  await t?.close();
  await router?.close();
});
beforeEach(() => router.reset());

describe('PUT /api/agents/:id/budget', () => {
  it('sets, reports and clears a budget; stored in the database', async () => {
    const a = await deploy(owner.id);
    const set = await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: 12.5 });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toEqual({ monthlyBudgetUsd: 12.5, monthToDateUsd: 0, exceeded: false, periodStart: monthOf(new Date()) });
    const row = await t.database.db.kysely.selectFrom('agent_budgets').selectAll().where('agent_id', '=', a.agentId).executeTakeFirst();
    expect(Number(row?.monthly_budget_usd)).toBe(12.5);
    const view = await t.web.inject({ method: 'GET', url: `/api/agents/${a.agentId}/usage`, headers: { cookie: owner.cookie } });
    expect(view.json().budget.monthlyBudgetUsd).toBe(12.5);
    const top = await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: 100000 });
    expect(top.json().monthlyBudgetUsd).toBe(100000);
    const cleared = await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: null });
    expect(cleared.statusCode).toBe(200);
    expect(cleared.json().monthlyBudgetUsd).toBeNull();
    expect(await t.database.db.kysely.selectFrom('agent_budgets').selectAll().where('agent_id', '=', a.agentId).execute()).toEqual([]);
  });

  it.each([
    ['zero', { monthlyBudgetUsd: 0 }],
    ['negative', { monthlyBudgetUsd: -5 }],
    ['above 100000', { monthlyBudgetUsd: 100000.01 }],
    ['a string', { monthlyBudgetUsd: '10' }],
    ['missing', {}],
    ['a boolean', { monthlyBudgetUsd: true }],
  ])('400 with a clear error for %s', async (_name, payload) => {
    const a = await deploy(owner.id);
    const res = await setBudget(owner.cookie, a.agentId, payload);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toContain('monthlyBudgetUsd: must be a number greater than 0 and at most 100000 (USD), or null');
  });

  it.each([
    ['1e-7', 1e-7],
    ['5.09e-208', 5.09e-208],
    ['0.00000049', 0.00000049],
    ['0.00000099', 0.00000099],
  ])('a positive amount below a millionth of a dollar (%s) is 400, not a 500 from the CHECK; nothing stored', async (_name, amount) => {
    const a = await deploy(owner.id);
    const res = await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: amount });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ error: 'monthlyBudgetUsd: must be at least 0.000001 (USD): a budget is kept to 6 decimal places' });
    expect(await t.database.db.kysely.selectFrom('agent_budgets').selectAll().where('agent_id', '=', a.agentId).execute()).toEqual([]);
  });

  it('0.000001 is the smallest budget and is stored exactly', async () => {
    const a = await deploy(owner.id);
    const res = await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: 0.000001 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().monthlyBudgetUsd).toBe(0.000001);
    const row = await t.database.db.kysely.selectFrom('agent_budgets').selectAll().where('agent_id', '=', a.agentId).executeTakeFirst();
    expect(row?.monthly_budget_usd).toBe('0.000001');
  });

  it('an amount the CHECK still refuses (past the route’s schema) is a 400 from the service, the previous budget kept', async () => {
    const a = await deploy(owner.id);
    await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: 7 });
    for (const usd of [1e-7, 100000.5])
      await expect(t.platform.services.ai.budgets.set(owner.id, a.agentId, usd)).rejects.toMatchObject({
        status: 400,
        message: 'monthlyBudgetUsd: must be at least 0.000001 and at most 100000 (USD, kept to 6 decimal places)',
      });
    const view = await t.web.inject({ method: 'GET', url: `/api/agents/${a.agentId}/usage`, headers: { cookie: owner.cookie } });
    expect(view.json().budget.monthlyBudgetUsd).toBe(7);
  });

  it('400 for a body that is not a JSON object; 401 without a session; 404 for another user’s agent (unchanged)', async () => {
    const a = await deploy(owner.id);
    expect((await setBudget(owner.cookie, a.agentId, '[1]')).statusCode).toBe(400);
    expect((await setBudget(undefined, a.agentId, { monthlyBudgetUsd: 1 })).statusCode).toBe(401);
    const theirs = await setBudget(stranger.cookie, a.agentId, { monthlyBudgetUsd: 1 });
    expect(theirs.statusCode).toBe(404);
    expect(theirs.json()).toEqual({ error: 'Agent not found' });
    expect(await t.database.db.kysely.selectFrom('agent_budgets').selectAll().where('agent_id', '=', a.agentId).execute()).toEqual([]);
  });
});

describe('row-level security', () => {
  it("another user and a query without user see neither the budget nor the agent's rollup, and cannot write a budget for it", async () => {
    const a = await deploy(owner.id);
    await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: 3 });
    await ask(a.key);
    await t.platform.services.ai.usage.flush();
    const db = t.database.db;
    const read = async (trx: Parameters<Parameters<typeof db.withoutUser>[0]>[0]) => [
      (await trx.selectFrom('agent_budgets').selectAll().where('agent_id', '=', a.agentId).execute()).length,
      (await trx.selectFrom('ai_usage_agent_monthly').selectAll().where('agent_id', '=', a.agentId).execute()).length,
    ];
    expect(await db.withUser(owner.id, read)).toEqual([1, 1]);
    expect(await db.withUser(stranger.id, read)).toEqual([0, 0]);
    expect(await db.withoutUser(read)).toEqual([0, 0]);
    // as the owner (row-level security's check) or as themselves (the agent's owner reference): refused
    for (const userId of [owner.id, stranger.id])
      await expect(
        db.withUser(stranger.id, (trx) =>
          trx
            .insertInto('agent_budgets')
            .values({ agent_id: a.agentId, user_id: userId, monthly_budget_usd: '1' })
            .onConflict((oc) => oc.column('agent_id').doUpdateSet({ monthly_budget_usd: '1' }))
            .execute(),
        ),
      ).rejects.toThrow();
    expect(
      (await t.web.inject({ method: 'GET', url: `/api/agents/${a.agentId}/usage`, headers: { cookie: owner.cookie } })).json().budget,
    ).toMatchObject({ monthlyBudgetUsd: 3 });
  });
});

describe('the gateway past the budget', () => {
  it('refuses the call with an OpenAI-shaped 429 the SDK understands, without contacting the provider', async () => {
    const a = await deploy(owner.id);
    // exactly two calls' worth: two pass, the third is refused (cost ≥ budget)
    expect((await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: 2 * CALL_COST })).statusCode).toBe(200);
    await ask(a.key);
    await ask(a.key);
    expect(router.requests).toHaveLength(2);
    const err = await ask(a.key).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    const e = err as RateLimitError;
    expect(e.status).toBe(429);
    expect(e.error).toMatchObject({ type: 'insufficient_quota', code: 'budget_exceeded', periodStart: monthOf(new Date()) });
    expect(e.message).toContain(`This agent's monthly budget of $0.000009 is used up ($0.000009 spent since ${monthOf(new Date())})`);
    expect(e.message).toContain("Raise it on the agent's Usage tab.");
    expect(router.requests).toHaveLength(2);

    // streamed calls are refused the same way, before the stream opens
    const streamed = await client(a.key)
      .chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'x' }], stream: true })
      .catch((x: unknown) => x);
    expect(streamed).toBeInstanceOf(RateLimitError);
    expect(router.requests).toHaveLength(2);

    // the owner's view says so
    const view = await t.web.inject({ method: 'GET', url: `/api/agents/${a.agentId}/usage`, headers: { cookie: owner.cookie } });
    expect(view.json().budget).toMatchObject({ exceeded: true, monthToDateUsd: 2 * CALL_COST });

    // raising it lets the agent call again at once (same process: no cache delay)
    await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: 1 });
    await expect(ask(a.key)).resolves.toMatchObject({ model: 'openai/gpt-4o-mini' });
    expect(callsIn(await usageOf(a.agentId))).toBe(3);
  });

  it('counts streamed calls toward the budget', async () => {
    const a = await deploy(owner.id);
    await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: CALL_COST });
    const stream = await client(a.key).chat.completions.create({
      model: 'openai/gpt-4o-mini',
      messages: [{ role: 'user', content: 'stream' }],
      stream: true,
    });
    for await (const _ of stream) {
      // read to the end: usage is recorded when the stream ends
    }
    await expect(ask(a.key)).rejects.toBeInstanceOf(RateLimitError);
    expect(router.requests).toHaveLength(1);
  });

  it('usage recorded before the budget was set (this month) counts; another agent of the owner is not affected', async () => {
    const a = await deploy(owner.id);
    const b = await deploy(owner.id);
    await ask(a.key);
    await t.platform.services.ai.usage.flush();
    await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: CALL_COST });
    await expect(ask(a.key)).rejects.toBeInstanceOf(RateLimitError);
    await expect(ask(b.key)).resolves.toBeDefined();
  });

  it("40 concurrent calls against a nearly spent budget overshoot it by at most one call's hold, and usage stays exact", async () => {
    const a = await deploy(owner.id);
    // max_tokens 5: each call holds its prompt (32 characters ≈ 11 tokens) and 5 output tokens at the
    // dearest model it may fall back to (google/gemini-2.5-flash, $0.30 and $2.50 per million)
    const hold = Math.ceil(JSON.stringify([{ role: 'user', content: 'hi' }]).length / 3) * 0.3e-6 + 5 * 2.5e-6;
    const budget = 10 * CALL_COST;
    await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: budget });
    for (let i = 0; i < 8; i++) await ask(a.key); // 8 of the 10 calls' worth spent, one after another
    router.delayMs = 100;
    const small = () =>
      client(a.key).chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 });
    const results = await Promise.allSettled(Array.from({ length: 40 }, () => small()));
    router.delayMs = 0;
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    const refused = results.filter((r) => r.status === 'rejected' && r.reason instanceof RateLimitError).length;
    expect(ok + refused).toBe(40);
    expect(ok).toBeGreaterThanOrEqual(1);
    // every call that reached the provider is billed once, and only those
    expect(router.requests).toHaveLength(8 + ok);
    const rows = await usageOf(a.agentId);
    expect(callsIn(rows)).toBe(8 + ok);
    const rollup = await t.database.db.kysely
      .selectFrom('ai_usage_agent_monthly')
      .selectAll()
      .where('agent_id', '=', a.agentId)
      .executeTakeFirstOrThrow();
    const spent = Number(rollup.cost);
    expect(spent).toBeCloseTo((8 + ok) * CALL_COST, 12);
    // the bound: what was spent stays under the budget plus one call's hold
    expect(spent).toBeLessThanOrEqual(budget + hold);
    expect(rows.reduce((s, r) => s + Number(r.cost), 0)).toBeCloseTo(spent, 12);
    // every hold was given back: nothing is held once the calls have ended
    const held = await t.database.db.kysely
      .selectFrom('spend_holds')
      .select((eb) => eb.fn.sum<string>('reserved').as('held'))
      .where('scope', '=', `agent:${a.agentId}`)
      .executeTakeFirst();
    expect(Number(held?.held ?? 0)).toBe(0);
    // one after another, calls go on while the budget has room, and stop once it is used up
    let more = 0;
    while (
      more < 10 &&
      (await small().then(
        () => true,
        () => false,
      ))
    )
      more++;
    expect(await usageOf(a.agentId).then((r) => r.reduce((n, x) => n + Number(x.cost), 0))).toBeGreaterThanOrEqual(budget - 1e-12);
    expect(router.requests).toHaveLength(8 + ok + more);
  });

  it('a call without max_tokens holds the rest of the context window: alone under a tight budget, never refused right after another', async () => {
    const a = await deploy(owner.id);
    await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: 3 * CALL_COST });
    router.delayMs = 100;
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => ask(a.key)));
    router.delayMs = 0;
    // the first call's hold (128k tokens of output at $0.60 per million) covers the budget: the others wait their turn (refused)
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    // one after another, each call is admitted while the budget has room left
    await ask(a.key);
    await ask(a.key);
    await expect(ask(a.key)).rejects.toBeInstanceOf(RateLimitError);
    expect(callsIn(await usageOf(a.agentId))).toBe(3);
  });

  it("another process's live hold counts; a dead process's hold stops counting after the TTL", async () => {
    const a = await deploy(owner.id);
    await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: 1 });
    const hold = (minutesAgo: number) =>
      sql`INSERT INTO spend_holds (scope, period, holder, reserved, renewed_at)
          VALUES (${`agent:${a.agentId}`}, ${monthOf(new Date())}::date, gen_random_uuid(), 1, now() - make_interval(mins => ${minutesAgo}))`.execute(
        t.database.db.kysely,
      );
    await hold(11); // older than LIMITS.spendHoldTtlMs (10 minutes): its process is gone
    await expect(ask(a.key)).resolves.toBeDefined();
    await hold(1); // renewed a minute ago: a live call elsewhere holds the whole budget
    await expect(ask(a.key)).rejects.toBeInstanceOf(RateLimitError);
  });

  it('concurrent calls without a budget: every call billed exactly once in rows and rollup', async () => {
    const a = await deploy(owner.id);
    const n = 25;
    await Promise.all(Array.from({ length: n }, () => ask(a.key)));
    const rows = await usageOf(a.agentId);
    expect(callsIn(rows)).toBe(n);
    const rollup = await t.database.db.kysely
      .selectFrom('ai_usage_agent_monthly')
      .selectAll()
      .where('agent_id', '=', a.agentId)
      .executeTakeFirstOrThrow();
    expect([Number(rollup.requests), Number(rollup.total_tokens)]).toEqual([n, n * FAKE_USAGE.total_tokens]);
    const report = await t.web.inject({ method: 'GET', url: '/api/usage', headers: { cookie: owner.cookie } });
    expect(report.json().byAgent.find((x: { agentId: string }) => x.agentId === a.agentId)).toMatchObject({ requests: n });
  });
});

describe('the agent passes the refusal on', () => {
  it("the built-in runtime, its model being the platform's gateway, tells its chat caller why (HTTP and WebSocket)", async () => {
    const a = await deploy(owner.id);
    await setBudget(owner.cookie, a.agentId, { monthlyBudgetUsd: CALL_COST });
    await ask(a.key);
    const token = 'r'.repeat(48);
    // what the local driver runs for the agent: AGENT_MODEL_BASE_URL is the gateway, the key its own apk_ key
    const { app } = await createGateway({
      gatewayToken: token,
      agentId: a.agentId,
      model: { baseUrl: gateway, apiKey: a.key, defaultModel: 'openai/gpt-4o-mini', timeoutMs: 5_000 },
      logger: pino({ level: 'silent' }),
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
      const http = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(http.status).toBe(429);
      expect(((await http.json()) as { error: { message: string } }).error.message).toContain("This agent's monthly budget of");

      const ws = new WebSocket(`${url.replace('http', 'ws')}/ws`, { headers: { authorization: `Bearer ${token}` } });
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      const frame = new Promise<{ type: string; error?: string; code?: string }>((resolve) =>
        ws.once('message', (d) => resolve(JSON.parse(String(d)))),
      );
      ws.send(JSON.stringify({ type: 'chat', content: 'hello' }));
      const f = await frame;
      ws.close();
      expect(f).toMatchObject({ type: 'error', code: 'budget_exceeded' });
      expect(f.error).toContain("This agent's monthly budget of");
      expect(f.error).toContain("Raise it on the agent's Usage tab.");
      expect(router.requests).toHaveLength(1);
    } finally {
      await app.close();
    }
  });
});
