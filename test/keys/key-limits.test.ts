/**
 * API keys people can hand out (docs/payments.md "API keys"; §4.3 API keys, extended): a key
 * limited to some agents reaches only those, a key's monthly budget and rate limit stop it with a
 * sentence (OpenAI's error shape on the OpenAI-compatible paths), an expired key and a rolled
 * key's old secret past its grace are refused like a deleted one, and usage is read per key.
 * Through the HTTP API on real sockets: the official `openai` client and WebSockets through the
 * web app's proxy, agents that are the built-in runtime, whose model is the platform's gateway.
 */
import OpenAI, { APIError, NotFoundError, RateLimitError } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { FAKE_USAGE } from '../fakes/openai-upstream.ts';
import { type RuntimePlatform, startRuntimePlatform } from './helpers.ts';

/** openai/gpt-4o-mini: $0.15 and $0.60 per million tokens: $0.0000045 per fake call, $0.000005 as reports round it (1e-6) */
const CALL_COST = FAKE_USAGE.prompt_tokens * 0.15e-6 + FAKE_USAGE.completion_tokens * 0.6e-6;
const SHOWN_COST = Math.round(CALL_COST * 1e6) / 1e6;

let p: RuntimePlatform;
let owner: { id: string; cookie: string; agentIds: string[] };

type CreatedKey = { id: string; key: string; [field: string]: unknown };

async function api(
  method: string,
  path: string,
  opts: { cookie?: string; key?: string; body?: unknown; headers?: Record<string, string> } = {},
) {
  return fetch(`${p.webUrl}${path}`, {
    method,
    headers: {
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(opts.cookie ? { cookie: opts.cookie } : {}),
      ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
      ...opts.headers,
    },
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
  });
}

async function createKeyFor(cookie: string, body: Record<string, unknown>): Promise<CreatedKey> {
  const res = await api('POST', '/api/keys', { cookie, body });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as CreatedKey;
}
const createKey = (body: Record<string, unknown>) => createKeyFor(owner.cookie, body);

const client = (key: string, agentId: string) =>
  new OpenAI({ apiKey: key, baseURL: `${p.webUrl}/api/agents/${agentId}/v1`, maxRetries: 0 });
const ask = (key: string, agentId: string) =>
  client(key, agentId).chat.completions.create({ model: 'default', messages: [{ role: 'user', content: 'hi' }] });

/** The status a WebSocket upgrade to the agent's /ws through the proxy is answered with (101 when it opens). */
const upgrade = (agentId: string, key: string) =>
  new Promise<number>((resolve, reject) => {
    const socket = new WebSocket(`${p.webUrl.replace('http', 'ws')}/api/agents/${agentId}/ws`, {
      headers: { authorization: `Bearer ${key}` },
    });
    socket.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      socket.terminate();
    });
    socket.on('open', () => {
      resolve(101);
      socket.close();
    });
    socket.on('error', reject);
  });

/** $1.00 on the owner's balance, which the paid gateway's plugin calls are charged to */
async function creditOneDollar(userId: string) {
  const { ledger, sessionWallet } = p.t.platform.services;
  await ledger.credit({
    address: await sessionWallet.ensureAddress(userId),
    amountMicros: 1_000_000,
    eventId: `test:${userId}`,
    source: 'test',
  });
}
const walletBalance = async (cookie: string) =>
  ((await (await api('GET', '/api/wallet', { cookie })).json()) as { balance: string }).balance;

const usageByKey = async () => {
  await p.t.platform.services.ai.usage.flush();
  const res = await api('GET', '/api/usage?days=1', { cookie: owner.cookie });
  expect(res.status).toBe(200);
  return ((await res.json()) as { byKey: { keyId: string; name: string | null; requests: number; cost: number }[] }).byKey;
};

beforeAll(async () => {
  p = await startRuntimePlatform();
  owner = await p.owner(2);
}, 60_000);
afterAll(async () => {
  await p?.close();
});
beforeEach(() => p.router.reset());

describe('a key limited to some agents (agentIds)', () => {
  it('reaches its agent; another agent of the same owner is 404 on the proxy (HTTP and WebSocket) and absent from GET /api/agents', async () => {
    const [mine, other] = owner.agentIds as [string, string];
    const scoped = await createKey({ name: 'Connect Agent 1', agentIds: [mine] });
    expect(scoped.agentIds).toEqual([mine]);

    expect((await ask(scoped.key, mine)).choices[0]?.message.content).toBeTruthy();
    await expect(ask(scoped.key, other)).rejects.toBeInstanceOf(NotFoundError);
    const models = await api('GET', `/api/agents/${other}/v1/models`, { key: scoped.key });
    expect(models.status).toBe(404);
    expect(await models.json()).toEqual({ error: 'Agent not found' });
    expect(await upgrade(other, scoped.key)).toBe(404);
    expect(await upgrade(mine, scoped.key)).toBe(101);

    const listed = (await (await api('GET', '/api/agents', { key: scoped.key })).json()) as { agents: { id: string }[]; count: number };
    expect(listed.agents.map((a) => a.id)).toEqual([mine]);
    expect(listed.count).toBe(1);
    // the owner's session, and an unlimited key, still see both
    const all = (await (await api('GET', '/api/agents', { cookie: owner.cookie })).json()) as { count: number };
    expect(all.count).toBe(2);
  });

  it("naming an agent that is not the caller's, or none, is 400 with the field named; nothing is created", async () => {
    const stranger = await p.owner(1);
    const before = ((await (await api('GET', '/api/keys', { cookie: owner.cookie })).json()) as { keys: unknown[] }).keys.length;
    for (const [agentIds, message] of [
      [[stranger.agentIds[0]], `agentIds: "${stranger.agentIds[0]}" is not one of your agents`],
      [['no-such-agent'], 'agentIds: "no-such-agent" is not one of your agents'],
      [[], 'agentIds: name at least one of your agents, or leave it out (null) for a key that reaches all of them'],
    ] as const) {
      const res = await api('POST', '/api/keys', { cookie: owner.cookie, body: { name: 'bad', agentIds } });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe(message);
    }
    const after = ((await (await api('GET', '/api/keys', { cookie: owner.cookie })).json()) as { keys: unknown[] }).keys.length;
    expect(after).toBe(before);
  });

  it('PATCH changes the agents a key reaches at once; null lifts the limit', async () => {
    const [first, second] = owner.agentIds as [string, string];
    const k = await createKey({ name: 'moving', agentIds: [first] });
    expect((await api('GET', `/api/agents/${second}/v1/models`, { key: k.key })).status).toBe(404);
    const moved = await api('PATCH', `/api/keys/${k.id}`, { cookie: owner.cookie, body: { agentIds: [second] } });
    expect(moved.status).toBe(200);
    expect(((await moved.json()) as { agentIds: string[] }).agentIds).toEqual([second]);
    expect((await api('GET', `/api/agents/${second}/v1/models`, { key: k.key })).status).toBe(200);
    expect((await api('GET', `/api/agents/${first}/v1/models`, { key: k.key })).status).toBe(404);
    await api('PATCH', `/api/keys/${k.id}`, { cookie: owner.cookie, body: { agentIds: null } });
    expect((await api('GET', `/api/agents/${first}/v1/models`, { key: k.key })).status).toBe(200);
  });
});

describe('a key limited to some agents on the paid gateway (POST /api/v1/gateway, plugin agent)', () => {
  /** agent plugin calls: $0.05 each from the owner's balance */
  const gatewayCall = (key: string) =>
    api('POST', '/api/v1/gateway', { key, body: { plugin: 'agent', messages: [{ role: 'user', content: 'hi' }] } });
  const callsByAgent = async (cookie: string) => {
    await p.t.platform.services.ai.usage.flush();
    const res = await api('GET', '/api/usage?days=1', { cookie });
    const byAgent = ((await res.json()) as { byAgent: { agentId: string; requests: number }[] }).byAgent;
    return (id: string) => byAgent.find((a) => a.agentId === id)?.requests ?? 0;
  };
  it("reaches only the key's agent, never the owner's other running agent; none of its agents running is 404 and costs nothing", async () => {
    const o = await p.owner(2);
    const [oldest, newest] = o.agentIds as [string, string];
    await creditOneDollar(o.id);

    // an unlimited key reaches the plugin's usual choice (the oldest running agent)
    const all = await createKeyFor(o.cookie, { name: 'all' });
    expect((await gatewayCall(all.key)).status).toBe(200);
    let calls = await callsByAgent(o.cookie);
    expect([calls(oldest), calls(newest)]).toEqual([1, 0]);

    // a key limited to the other agent reaches that one
    const scoped = await createKeyFor(o.cookie, { name: 'newest only', agentIds: [newest] });
    const res = await gatewayCall(scoped.key);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as { via?: string }).via).toBe('agent');
    calls = await callsByAgent(o.cookie);
    expect([calls(oldest), calls(newest)]).toEqual([1, 1]);
    expect(await walletBalance(o.cookie)).toBe('0.90');
    // the agent is told the key (as the proxy does), so its model call is the key's
    const byKey = ((await (await api('GET', '/api/usage?days=1', { cookie: o.cookie })).json()) as { byKey: { keyId: string }[] }).byKey;
    expect(byKey.map((k) => k.keyId).sort()).toEqual([all.id, scoped.id].sort());

    // its agent stopped: 404 with a sentence, the charge given back, no other agent and no model called
    await p.t.database.db.pool.query(`UPDATE agents SET status = 'stopped' WHERE id = $1`, [newest]);
    const before = p.router.requests.length;
    const refused = await gatewayCall(scoped.key);
    expect(refused.status).toBe(404);
    expect(((await refused.json()) as { error: string }).error).toBe('No agent this API key may reach is running');
    expect(p.router.requests.length).toBe(before);
    calls = await callsByAgent(o.cookie);
    expect([calls(oldest), calls(newest)]).toEqual([1, 1]);
    expect(await walletBalance(o.cookie)).toBe('0.90');
  });
});

describe("a key's monthly budget (monthlyBudgetUsd)", () => {
  it('stops that key with 402 and a sentence in OpenAI’s shape, while another key of the same owner still works; usage is read per key', async () => {
    const [agent] = owner.agentIds as [string];
    // below one call's cost: the first call is admitted (nothing spent yet), the next is refused
    const budgeted = await createKey({ name: 'budgeted', monthlyBudgetUsd: 0.000002 });
    const free = await createKey({ name: 'free' });
    await ask(budgeted.key, agent);
    const calls = p.router.requests.length;

    const refused = await ask(budgeted.key, agent).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(APIError);
    const err = refused as APIError;
    expect(err.status).toBe(402);
    expect(err.message).toContain("This API key's monthly budget of $0.000002 is used up");
    expect(err.message).toContain('Raise it on the Keys page, or use another key.');
    expect(err.code).toBe('key_budget_exceeded');
    expect(err.type).toBe('insufficient_quota');
    // the provider was not asked again
    expect(p.router.requests.length).toBe(calls);

    // the other key of the same owner, on the same agent, is not stopped
    expect((await ask(free.key, agent)).choices[0]?.message.content).toBeTruthy();
    expect(p.router.requests.length).toBe(calls + 1);

    // per key: one call each, at the model's price
    const byKey = await usageByKey();
    const of = (id: string) => byKey.find((k) => k.keyId === id);
    expect(of(budgeted.id)).toMatchObject({ name: 'budgeted', requests: 1 });
    expect(of(budgeted.id)!.cost).toBe(SHOWN_COST);
    expect(of(free.id)).toMatchObject({ name: 'free', requests: 1 });
    // and on the Keys page's list: this month's spend and the limit
    const listed = ((await (await api('GET', '/api/keys', { cookie: owner.cookie })).json()) as { keys: CreatedKey[] }).keys;
    expect(listed.find((k) => k.id === budgeted.id)).toMatchObject({ monthlyBudgetUsd: 0.000002, monthToDateUsd: SHOWN_COST });

    // the WebSocket is refused too, with the same sentence
    expect(await upgrade(agent, budgeted.key)).toBe(402);

    // raising the budget lets the key call again at once
    const raised = await api('PATCH', `/api/keys/${budgeted.id}`, { cookie: owner.cookie, body: { monthlyBudgetUsd: 1 } });
    expect(raised.status).toBe(200);
    expect((await ask(budgeted.key, agent)).choices[0]?.message.content).toBeTruthy();
  });

  it("stops the key's paid gateway model calls too (plugin generate-text): counted for the key, refused past it with the charge given back", async () => {
    const o = await p.owner(1);
    await creditOneDollar(o.id);
    const balance = () => walletBalance(o.cookie);
    const generate = (key: string) =>
      api('POST', '/api/v1/gateway', { key, body: { plugin: 'generate-text', prompt: 'hi', model: 'openai/gpt-4o-mini' } });
    const budgeted = await createKeyFor(o.cookie, { name: 'plugin budget', monthlyBudgetUsd: 0.000002 });

    const first = await generate(budgeted.key);
    expect(first.status, await first.clone().text()).toBe(200);
    expect(await balance()).toBe('0.99');
    await p.t.platform.services.ai.usage.flush();
    const byKey = (
      (await (await api('GET', '/api/usage?days=1', { cookie: o.cookie })).json()) as {
        byKey: { keyId: string; requests: number; cost: number }[];
      }
    ).byKey;
    expect(byKey.find((k) => k.keyId === budgeted.id)).toMatchObject({ requests: 1, cost: SHOWN_COST });

    const calls = p.router.requests.length;
    const refused = await generate(budgeted.key);
    expect(refused.status).toBe(402);
    const body = (await refused.json()) as { error: string; code: string };
    expect(body.code).toBe('KEY_BUDGET_EXCEEDED');
    expect(body.error).toContain("This API key's monthly budget of $0.000002 is used up");
    expect(p.router.requests.length).toBe(calls);
    // the plugin's price went back: one call paid, not two
    expect(await balance()).toBe('0.99');
  });

  it('a call through a WebSocket opened with a key is charged to that key', async () => {
    const [agent] = owner.agentIds as [string];
    const k = await createKey({ name: 'socket' });
    const socket = new WebSocket(`${p.webUrl.replace('http', 'ws')}/api/agents/${agent}/ws`, {
      headers: { authorization: `Bearer ${k.key}` },
    });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    const frame = new Promise<{ type: string }>((resolve) => socket.once('message', (d) => resolve(JSON.parse(String(d)))));
    socket.send(JSON.stringify({ type: 'chat', content: 'hello' }));
    expect((await frame).type).toBe('reply');
    socket.close();
    expect((await usageByKey()).find((u) => u.keyId === k.id)).toMatchObject({ requests: 1 });
  });

  it('a client cannot name a key itself: the header it sends is dropped, the call is not charged to that key', async () => {
    const [agent] = owner.agentIds as [string];
    const victim = await createKey({ name: 'victim' });
    const res = await api('POST', `/api/agents/${agent}/v1/chat/completions`, {
      cookie: owner.cookie,
      headers: { 'x-platform-key-id': victim.id, origin: p.t.config.PUBLIC_URL },
      body: { model: 'default', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect((await usageByKey()).find((u) => u.keyId === victim.id)).toBeUndefined();
  });
});

describe("a key's rate limit (rateLimitPerMinute)", () => {
  it('429 with Retry-After and a sentence past it (OpenAI’s shape on the /v1 paths); another key is not counted', async () => {
    const [agent] = owner.agentIds as [string];
    const limited = await createKey({ name: 'limited', rateLimitPerMinute: 2 });
    const other = await createKey({ name: 'other' });
    expect((await api('GET', `/api/agents/${agent}/v1/models`, { key: limited.key })).status).toBe(200);
    expect((await api('GET', '/api/agents', { key: limited.key })).status).toBe(200);

    const onV1 = await api('GET', `/api/agents/${agent}/v1/models`, { key: limited.key });
    expect(onV1.status).toBe(429);
    const retryAfter = Number(onV1.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    const body = (await onV1.json()) as { error: { message: string; type: string; code: string } };
    expect(body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(body.error.message).toContain('This API key may make 2 requests a minute');
    // the openai client reads it as a rate limit
    await expect(ask(limited.key, agent)).rejects.toBeInstanceOf(RateLimitError);

    // elsewhere in the plain shape
    const plain = await api('GET', '/api/agents', { key: limited.key });
    expect(plain.status).toBe(429);
    expect(plain.headers.get('retry-after')).toBeTruthy();
    expect(await plain.json()).toMatchObject({ code: 'KEY_RATE_LIMITED' });

    expect((await api('GET', `/api/agents/${agent}/v1/models`, { key: other.key })).status).toBe(200);
  });
});

describe('expiry (expiresAt)', () => {
  it('an expired key is 401 Invalid API key, as a deleted one, on the proxy and on GET /api/agents; the Keys list says expired', async () => {
    const [agent] = owner.agentIds as [string];
    const k = await createKey({ name: 'short-lived', expiresAt: new Date(Date.now() + 1500).toISOString() });
    // used (and so cached) before it expires
    expect((await api('GET', `/api/agents/${agent}/v1/models`, { key: k.key })).status).toBe(200);
    expect((await api('GET', '/api/agents', { key: k.key })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1700));
    const proxied = await api('GET', `/api/agents/${agent}/v1/models`, { key: k.key });
    expect(proxied.status).toBe(401);
    expect(await proxied.json()).toEqual({ error: 'Invalid API key' });
    const unknown = await api('GET', `/api/agents/${agent}/v1/models`, { key: 'sk_not-a-real-key-000000000000000000000000' });
    expect(await unknown.json()).toEqual({ error: 'Invalid API key' });
    expect((await api('GET', '/api/agents', { key: k.key })).status).toBe(401);
    const listed = ((await (await api('GET', '/api/keys', { cookie: owner.cookie })).json()) as { keys: CreatedKey[] }).keys;
    expect(listed.find((x) => x.id === k.id)).toMatchObject({ expired: true });
  });

  it('an expiry in the past, or not a date, is 400', async () => {
    for (const [expiresAt, message] of [
      [new Date(Date.now() - 1000).toISOString(), 'expiresAt: must be in the future'],
      ['tomorrow', 'expiresAt: must be a date and time (ISO 8601), or null'],
    ]) {
      const res = await api('POST', '/api/keys', { cookie: owner.cookie, body: { name: 'x', expiresAt } });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe(message);
    }
  });
});

describe('POST /api/keys/:id/roll', () => {
  it('answers a new secret once; the old one works within the grace and is refused after it', async () => {
    const [agent] = owner.agentIds as [string];
    const k = await createKey({ name: 'rolled', monthlyBudgetUsd: 5 });
    expect((await api('GET', `/api/agents/${agent}/v1/models`, { key: k.key })).status).toBe(200);
    const res = await api('POST', `/api/keys/${k.id}/roll`, { cookie: owner.cookie, body: { graceSeconds: 2 } });
    expect(res.status).toBe(200);
    const rolled = (await res.json()) as CreatedKey & { keyPreview: string; previousKeyExpiresAt: string };
    expect(rolled.id).toBe(k.id);
    expect(rolled.key).not.toBe(k.key);
    expect(rolled.keyPreview).toBe(rolled.key.slice(0, 10));
    expect(rolled.monthlyBudgetUsd).toBe(5);
    expect(Date.parse(rolled.previousKeyExpiresAt) - Date.now()).toBeLessThanOrEqual(2_000);
    // the secret is never shown again
    expect(await (await api('GET', `/api/keys/${k.id}`, { cookie: owner.cookie })).text()).not.toContain(rolled.key);

    expect((await api('GET', `/api/agents/${agent}/v1/models`, { key: rolled.key })).status).toBe(200);
    expect((await api('GET', `/api/agents/${agent}/v1/models`, { key: k.key })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 2300));
    const old = await api('GET', `/api/agents/${agent}/v1/models`, { key: k.key });
    expect(old.status).toBe(401);
    expect(await old.json()).toEqual({ error: 'Invalid API key' });
    expect((await api('GET', `/api/agents/${agent}/v1/models`, { key: rolled.key })).status).toBe(200);
  });

  it('the default grace is 24 hours; a grace outside 0..604800 is 400; another user’s key is 404', async () => {
    const k = await createKey({ name: 'default grace' });
    const res = await api('POST', `/api/keys/${k.id}/roll`, { cookie: owner.cookie });
    expect(res.status).toBe(200);
    const until = Date.parse(((await res.json()) as { previousKeyExpiresAt: string }).previousKeyExpiresAt);
    expect(Math.abs(until - (Date.now() + 24 * 3600_000))).toBeLessThan(60_000);
    for (const graceSeconds of [-1, 604801, 1.5, 'soon'])
      expect((await api('POST', `/api/keys/${k.id}/roll`, { cookie: owner.cookie, body: { graceSeconds } })).status).toBe(400);
    const stranger = await p.owner(0);
    expect((await api('POST', `/api/keys/${k.id}/roll`, { cookie: stranger.cookie, body: {} })).status).toBe(404);
  });

  it('a grace of 0 refuses the old secret at once', async () => {
    const [agent] = owner.agentIds as [string];
    const k = await createKey({ name: 'compromised' });
    expect((await api('GET', `/api/agents/${agent}/v1/models`, { key: k.key })).status).toBe(200);
    expect((await api('POST', `/api/keys/${k.id}/roll`, { cookie: owner.cookie, body: { graceSeconds: 0 } })).status).toBe(200);
    expect((await api('GET', `/api/agents/${agent}/v1/models`, { key: k.key })).status).toBe(401);
  });
});
