/**
 * The model gateway's side of API key budgets (docs/payments.md "API keys"): a call whose agent's
 * runtime names an API key (header `x-platform-key-id`, which the agent proxy sets for a request
 * made with that key) is held against the key's monthly budget in the one hold statement
 * (`hold_spend`, scope `key:<id>`) and recorded with the key; a key that is not the calling
 * agent's owner's is ignored, so an agent can at most move its own owner's spend between that
 * owner's keys. Real sockets, the official `openai` client, the local fake provider.
 */
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MODEL_GATEWAY_PATH } from '../../src/config/env.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { FAKE_USAGE, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';

const ROUTER_KEY = 'router-secret-key-of-the-operator';
/** openai/gpt-4o-mini: $0.0000045 per fake call */
const CALL_COST = FAKE_USAGE.prompt_tokens * 0.15e-6 + FAKE_USAGE.completion_tokens * 0.6e-6;

let t: AgentsTestPlatform;
let router: FakeOpenAi;
let gateway: string;

async function deploy(userId: string) {
  const res = await t.backend.inject({
    method: 'POST',
    url: '/api/deployments',
    headers: bearer(t),
    payload: { userId, name: 'Keyed', plan: 'network', model: 'openai/gpt-4o-mini' },
  });
  expect(res.statusCode, res.body).toBe(202);
  const agentId = res.json().agent.id as string;
  const spec = await eventually(async () => t.driver.deploys.findLast((s) => s.agentId === agentId));
  return { agentId, key: spec.platformApiKey as string };
}

async function apiKey(cookie: string, body: Record<string, unknown>) {
  const res = await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie }, payload: body });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { id: string; key: string };
}

/** One call as the agent's runtime makes it for a request made with the key `keyId`. */
const ask = (agentKey: string, keyId?: string, extra: Record<string, unknown> = {}) =>
  new OpenAI({
    apiKey: agentKey,
    baseURL: gateway,
    maxRetries: 0,
    defaultHeaders: keyId === undefined ? {} : { 'x-platform-key-id': keyId },
  }).chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], ...extra });

const rowsOf = async (agentId: string) => {
  await t.platform.services.ai.usage.flush();
  return t.database.db.kysely.selectFrom('ai_usage').select(['key_id', 'requests', 'cost']).where('agent_id', '=', agentId).execute();
};

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: ROUTER_KEY });
  t = await startAgentsPlatform({ env: { ROUTER_API_KEY: ROUTER_KEY, ROUTER_BASE_URL: router.url, AGENT_GATEWAY_RATE_LIMIT: '1000' } });
  gateway = `${t.backendUrl}${MODEL_GATEWAY_PATH}`;
});
afterAll(async () => {
  await t?.close();
  await router?.close();
});
beforeEach(() => router.reset());

describe('x-platform-key-id on the model gateway', () => {
  it("holds the named key's budget: 402 key_budget_exceeded once it is spent, before the provider is contacted", async () => {
    const owner = await subscriber(t, 'network');
    const a = await deploy(owner.id);
    const k = await apiKey(owner.cookie, { name: 'budgeted', monthlyBudgetUsd: 0.000002 });
    await ask(a.key, k.id);
    const refused = await ask(a.key, k.id).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(402);
    expect((refused as APIError).code).toBe('key_budget_exceeded');
    expect((refused as APIError).message).toContain("This API key's monthly budget of $0.000002 is used up ($0.000005 spent since");
    expect(router.requests.filter((r) => r.path.endsWith('/chat/completions'))).toHaveLength(1);
    // the same agent's calls for no key, or another key, are not this key's
    const other = await apiKey(owner.cookie, { name: 'other' });
    await ask(a.key);
    await ask(a.key, other.id);
    expect(router.requests.filter((r) => r.path.endsWith('/chat/completions'))).toHaveLength(3);
    const rows = await rowsOf(a.agentId);
    const byKey = (id: string | null) => rows.filter((r) => r.key_id === id).reduce((n, r) => n + r.requests, 0);
    expect(byKey(k.id)).toBe(1);
    expect(byKey(other.id)).toBe(1);
    expect(byKey(null)).toBe(1);
    const rollup = await t.database.db.kysely.selectFrom('ai_usage_key_monthly').selectAll().where('key_id', '=', k.id).execute();
    expect(rollup).toHaveLength(1);
    expect(Number(rollup[0]!.cost)).toBeCloseTo(CALL_COST, 12);
  });

  it("a key that is not the agent's owner's is ignored: its budget does not apply and nothing is charged to it", async () => {
    const owner = await subscriber(t, 'network');
    const stranger = await subscriber(t, 'network');
    const a = await deploy(owner.id);
    const theirs = await apiKey(stranger.cookie, { name: 'theirs', monthlyBudgetUsd: 0.000001 });
    for (let i = 0; i < 3; i++) await ask(a.key, theirs.id);
    expect(router.requests.filter((r) => r.path.endsWith('/chat/completions'))).toHaveLength(3);
    const rows = await rowsOf(a.agentId);
    expect(rows.every((r) => r.key_id === null)).toBe(true);
    const theirUsage = await t.web.inject({ method: 'GET', url: '/api/usage?days=1', headers: { cookie: stranger.cookie } });
    expect(theirUsage.json().byKey).toEqual([]);
  });

  it('a header that is not a key id is ignored, never a 5xx', async () => {
    const owner = await subscriber(t, 'network');
    const a = await deploy(owner.id);
    for (const named of ['not-a-uuid', "'; DROP TABLE api_keys; --", '00000000-0000-0000-0000-000000000000'])
      expect((await ask(a.key, named)).choices[0]?.message.content).toBeTruthy();
    expect((await rowsOf(a.agentId)).every((r) => r.key_id === null)).toBe(true);
  });

  it('concurrent calls for one key overshoot its budget by at most one hold (max_tokens bounds the hold)', async () => {
    const owner = await subscriber(t, 'network');
    const a = await deploy(owner.id);
    // room for a few calls: each holds its prompt and 5 tokens of output at most
    const k = await apiKey(owner.cookie, { name: 'shared', monthlyBudgetUsd: 0.00002 });
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, () => ask(a.key, k.id, { max_tokens: 5 })));
    const admitted = outcomes.filter((o) => o.status === 'fulfilled').length;
    expect(admitted).toBeGreaterThan(0);
    for (const o of outcomes) if (o.status === 'rejected') expect((o.reason as APIError).status).toBe(402);
    const spent = (await rowsOf(a.agentId)).reduce((n, r) => n + Number(r.cost), 0);
    // the month's cost passes the budget by less than one call's cost
    expect(spent).toBeLessThan(0.00002 + CALL_COST);
  });
});
