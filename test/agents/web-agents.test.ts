/** §4.7 web agent API and §4.18 instance lifecycle, through a real backend on a loopback port. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import { agentLimitReached } from '../../src/domains/agents/web-provisioning.service.ts';
import { signUp } from '../helpers/platform.ts';
import { type AgentsTestPlatform, eventually, startAgentsPlatform, subscriber } from './helpers.ts';

let t: AgentsTestPlatform;

beforeAll(async () => {
  t = await startAgentsPlatform();
});
afterAll(() => t.close());

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
const web = (method: Method, url: string, cookie?: string, payload?: unknown) =>
  t.web.inject({ method, url, headers: cookie ? { cookie } : {}, ...(payload !== undefined ? { payload: payload as object } : {}) });

async function provisionRunning(cookie: string, name = 'Helper') {
  const res = await web('POST', '/api/agents/provision', cookie, { name });
  expect(res.statusCode).toBe(201);
  const id = res.json().agent.id as string;
  await eventually(async () => (await web('GET', `/api/agents/${id}`, cookie)).json().agent?.status === 'running');
  return id;
}

describe('list', () => {
  it('no session gives an empty list, not 401', async () => {
    const res = await web('GET', '/api/agents');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ agents: [], count: 0, status: 'ok' });
  });

  it("lists only the user's own agents, in the web shape", async () => {
    const u = await subscriber(t, 'collective');
    const id = await provisionRunning(u.cookie, 'Mine');
    const other = await subscriber(t);
    const list = (await web('GET', '/api/agents', u.cookie)).json();
    expect(list).toMatchObject({ count: 1, status: 'ok' });
    expect(list.agents[0]).toEqual({
      id,
      name: 'Mine',
      // §4.7's default, mapped by the owner's plan to the catalog id that runs (docs/agents.md "Model")
      model: 'anthropic/claude-opus-4.1',
      status: 'running',
      // the platform's authenticated proxy, never the gateway's own address (docs/agents.md)
      websocketUrl: expect.stringMatching(new RegExp(`^ws://[^/]+/api/agents/${id}/ws$`)),
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect((await web('GET', '/api/agents', other.cookie)).json()).toEqual({ agents: [], count: 0, status: 'ok' });
    const p = (await web('GET', '/api/agents/provision', u.cookie)).json();
    expect(p).toMatchObject({ success: true, count: 1 });
    expect((await web('GET', '/api/agents/provision')).statusCode).toBe(401);
  });
});

describe('provision', () => {
  it('401 without a session; 402 without an active subscription (body email is never an admin check)', async () => {
    expect((await web('POST', '/api/agents/provision', undefined, { name: 'x' })).statusCode).toBe(401);
    const u = await signUp(t.web);
    const res = await web('POST', '/api/agents/provision', u.cookie, { name: 'x', email: 'admin@example.com' });
    expect(res.statusCode).toBe(402);
    expect(res.json()).toMatchObject({ code: 'SUBSCRIPTION_REQUIRED' });
    expect((await web('GET', '/api/agents', u.cookie)).json().count).toBe(0);
  });

  it('201 provisioning → running; the backend got the plan, model and provider', async () => {
    const u = await subscriber(t, 'collective');
    const res = await web('POST', '/api/agents/provision', u.cookie, {
      name: '  Researcher ',
      model: 'gpt-4',
      tier: 'pro',
      config: { aiProvider: 'openai' },
    });
    expect(res.statusCode).toBe(201);
    const { success, agent } = res.json();
    expect(success).toBe(true);
    expect(agent).toMatchObject({ name: 'Researcher', status: 'provisioning', model: 'openai/gpt-4.1' });
    expect(Object.keys(agent).sort()).toEqual(['createdAt', 'id', 'model', 'name', 'status', 'websocketUrl']);
    await eventually(async () => (await web('GET', `/api/agents/${agent.id}`, u.cookie)).json().agent.status === 'running');
    const row = await t.database.db.kysely.selectFrom('agents').selectAll().where('id', '=', agent.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ plan: 'collective', model: 'openai/gpt-4.1', ai_provider: 'openai', user_id: u.id });
    const spec = t.driver.deploys.find((s) => s.agentId === agent.id)!;
    expect(spec.plan).toBe('collective');
  });

  it('claude-opus-4-6 (the default) sets provider anthropic; no tier → backend default label', async () => {
    const u = await subscriber(t, 'label');
    const res = await web('POST', '/api/agents/provision', u.cookie, { name: 'Default' });
    const row = await t.database.db.kysely.selectFrom('agents').selectAll().where('id', '=', res.json().agent.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ model: 'anthropic/claude-opus-4.1', ai_provider: 'anthropic', plan: 'label' });
  });

  it('web limit: starter 1 → 429 with current, limit and plan, saying the limit and how to raise it; pro 3', async () => {
    const starter = await subscriber(t, 'solo');
    await provisionRunning(starter.cookie, 'first');
    const over = await web('POST', '/api/agents/provision', starter.cookie, { name: 'second' });
    expect(over.statusCode).toBe(429);
    expect(over.json()).toEqual({
      error:
        'Agent limit reached: the solo plan allows 1 agent, and you have 1. Delete an agent, or subscribe to a larger plan in Settings.',
      code: 'AGENT_LIMIT_REACHED',
      current: 1,
      limit: 1,
      plan: 'solo',
    });

    const pro = await subscriber(t, 'collective');
    for (let i = 0; i < 3; i++)
      expect((await web('POST', '/api/agents/provision', pro.cookie, { name: `p${i}`, tier: 'pro' })).statusCode).toBe(201);
    expect((await web('POST', '/api/agents/provision', pro.cookie, { name: 'p3' })).json()).toMatchObject({ current: 3, limit: 3 });
  });

  it('the limit check and the insert are atomic: 10 parallel provisions by a starter user create exactly 1 agent', async () => {
    const u = await subscriber(t, 'solo');
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => web('POST', '/api/agents/provision', u.cookie, { name: `race ${i}` })),
    );
    const codes = results.map((r) => r.statusCode).sort();
    expect(codes.filter((c) => c === 201)).toHaveLength(1);
    expect(codes.filter((c) => c === 429)).toHaveLength(9);
    const rows = await t.database.db.kysely.selectFrom('agents').select('id').where('user_id', '=', u.id).execute();
    expect(rows).toHaveLength(1);
  });

  it('admins (session email in ADMIN_EMAILS, any case) need no subscription and get network plan', async () => {
    const admin = await signUp(t.web, { email: 'Admin@Example.com' });
    const res = await web('POST', '/api/agents/provision', admin.cookie, { name: 'Boss' });
    expect(res.statusCode).toBe(201);
    const row = await t.database.db.kysely
      .selectFrom('agents')
      .select('plan')
      .where('id', '=', res.json().agent.id)
      .executeTakeFirstOrThrow();
    expect(row.plan).toBe('network');
    // the admin's agents count against the admin's plan, not the size chosen:
    // Starter agents beside Boss (the backend's solo limit of 1 refused the second)
    for (const name of ['s1', 's2']) {
      const starter = await web('POST', '/api/agents/provision', admin.cookie, { name, tier: 'starter' });
      expect([starter.statusCode, starter.body]).toEqual([201, expect.any(String)]);
    }
  });

  it("the backend's limit for the plan (label: 10, under the web's 100) is the same 429 on the web, and no agent is kept", async () => {
    const u = await subscriber(t, 'label');
    for (let i = 0; i < 10; i++) expect((await web('POST', '/api/agents/provision', u.cookie, { name: `l${i}` })).statusCode).toBe(201);
    const res = await web('POST', '/api/agents/provision', u.cookie, { name: 'eleventh' });
    expect(res.statusCode).toBe(429);
    expect(res.json()).toEqual({
      error: expect.stringMatching(
        /^Agent limit reached: agents on the label plan .* limited to 10 agents per account, and you have 10\. /,
      ),
      code: 'AGENT_LIMIT_REACHED',
      current: 10,
      limit: 10,
      plan: 'label',
    });
    expect((await web('GET', '/api/agents', u.cookie)).json().count).toBe(10);
  });

  it('the limit message for admins and for servers without a card processor', () => {
    const base = { current: 100, limit: 100, by: 'account', canSubscribe: true } as const;
    expect(agentLimitReached({ ...base, plan: 'network', isAdmin: true }).message).toBe(
      'Agent limit reached: an admin may have 100 agents, and you have 100. Delete an agent to provision another.',
    );
    const solo = agentLimitReached({ current: 1, limit: 1, by: 'account', plan: 'solo', isAdmin: false, canSubscribe: false });
    expect(solo.status).toBe(429);
    expect(solo.message).toBe(
      'Agent limit reached: the solo plan allows 1 agent, and you have 1. Delete an agent, or ask an admin to move your account to a larger plan.',
    );
  });
});

describe('one agent', () => {
  let owner: Awaited<ReturnType<typeof subscriber>>;
  let intruder: Awaited<ReturnType<typeof subscriber>>;
  let id: string;
  beforeAll(async () => {
    owner = await subscriber(t, 'label');
    intruder = await subscriber(t, 'label');
    id = await provisionRunning(owner.cookie, 'Target');
  });

  it("another user's id is 404 on every route", async () => {
    for (const [method, url, body] of [
      ['GET', `/api/agents/${id}`],
      ['PATCH', `/api/agents/${id}`, { name: 'pwned' }],
      ['DELETE', `/api/agents/${id}`],
      ['GET', `/api/agents/${id}/config`],
      ['PUT', `/api/agents/${id}/config`, { a: 1 }],
      ['GET', `/api/agents/${id}/logs`],
      ['GET', `/api/agents/${id}/messages`],
      ['GET', `/api/agents/${id}/stats`],
      ['POST', `/api/instance/${owner.id}/restart`, {}],
      ['POST', `/api/instance/${intruder.id}/stop`, { agentId: id }],
    ] as [Method, string, unknown?][]) {
      const res = await web(method, url, intruder.cookie, body);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(typeof res.json().error).toBe('string');
    }
    expect((await web('GET', `/api/agents/${id}`, owner.cookie)).json().agent.name).toBe('Target');
  });

  it('401 without a session and with a revoked one', async () => {
    expect((await web('GET', `/api/agents/${id}`)).statusCode).toBe(401);
    const s = await signUp(t.web);
    await web('POST', '/api/auth/signout', s.cookie);
    expect((await web('GET', `/api/agents/${id}/logs`, s.cookie)).statusCode).toBe(401);
    expect((await web('POST', '/api/agents/provision', s.cookie, { name: 'x' })).statusCode).toBe(401);
  });

  it('GET returns {agent,status:ok}; PATCH renames (trimmed) and syncs the backend', async () => {
    const got = (await web('GET', `/api/agents/${id}`, owner.cookie)).json();
    expect(got).toMatchObject({ status: 'ok', agent: { id, name: 'Target', status: 'running' } });
    const res = await web('PATCH', `/api/agents/${id}`, owner.cookie, { name: '  Renamed  ' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true, agent: { id, name: 'Renamed', status: 'running', updatedAt: expect.any(String) } });
    expect((await web('GET', `/api/agents/${id}`, owner.cookie)).json().agent.name).toBe('Renamed');
    expect((await web('PATCH', `/api/agents/${id}`, owner.cookie, { name: '   ' })).json()).toEqual({ error: 'Name required' });
    expect((await web('PATCH', `/api/agents/${id}`, owner.cookie, { name: 'x'.repeat(65) })).statusCode).toBe(400);
  });

  it('config: GET and PUT (stored by the backend)', async () => {
    const put = await web('PUT', `/api/agents/${id}/config`, owner.cookie, { channels: { webchat: { enabled: false } } });
    expect(put.statusCode).toBe(200);
    // with the model that runs, as every answer names it (docs/agents.md "Model")
    const { model } = (await web('GET', `/api/agents/${id}`, owner.cookie)).json().agent;
    const config = { channels: { webchat: { enabled: false } }, agents: { defaults: { model } } };
    expect(put.json()).toEqual({ config, status: 'updated' });
    expect((await web('GET', `/api/agents/${id}/config`, owner.cookie)).json()).toEqual({ config, status: 'ok' });
  });

  it('config PUT: deep nesting and unstorable strings are 400 {error} on the web and the backend not 500', async () => {
    const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const bodies = [nested(5000), nested(10_000), nested(65), '{"x":"\\ud800"}', '{"x":"a\\udc00"}', '{"x":{"y":"\\u0000"}}'];
    for (const payload of bodies) {
      const res = await t.web.inject({
        method: 'PUT',
        url: `/api/agents/${id}/config`,
        headers: { cookie: owner.cookie, 'content-type': 'application/json' },
        payload,
      });
      expect(res.statusCode, payload.slice(0, 40)).toBe(400);
      expect(res.json().error).toMatch(/^Config is not serializable/);
      const backend = await t.backend.inject({
        method: 'PUT',
        url: `/api/agents/${id}`,
        headers: { authorization: `Bearer ${t.config.INTERNAL_API_KEY}`, 'x-user-id': owner.id, 'content-type': 'application/json' },
        payload: `{"config":${payload}}`,
      });
      expect(backend.statusCode, payload.slice(0, 40)).toBe(400);
      expect(typeof backend.json().error).toBe('string');
    }
    // the bound is the one POST /api/config has (LIMITS.configMaxDepth): 64 levels are still a configuration
    const ok = await t.web.inject({
      method: 'PUT',
      url: `/api/agents/${id}/config`,
      headers: { cookie: owner.cookie, 'content-type': 'application/json' },
      payload: nested(64),
    });
    expect(ok.statusCode).toBe(200);
    await web('PUT', `/api/agents/${id}/config`, owner.cookie, { channels: { webchat: { enabled: false } } });
  });

  it('logs: real runtime lines from the driver; limit default 50, capped at 100; level filter', async () => {
    const res = (await web('GET', `/api/agents/${id}/logs`, owner.cookie)).json();
    expect(res).toMatchObject({ limit: 50, status: 'ok', total: 2 });
    expect(res.logs[0]).toEqual({
      id: expect.any(String),
      timestamp: expect.any(String),
      level: 'info',
      message: `gateway listening for ${id}`,
      source: 'gateway',
      agentId: id,
    });
    expect((await web('GET', `/api/agents/${id}/logs?limit=500`, owner.cookie)).json().limit).toBe(100);
    const warn = (await web('GET', `/api/agents/${id}/logs?level=warn&limit=5`, owner.cookie)).json();
    expect(warn.logs.map((l: { level: string }) => l.level)).toEqual(['warn']);
  });

  it('messages: stored chat messages with limit and offset', async () => {
    for (let i = 0; i < 3; i++) {
      await t.platform.services.agentsWeb.recordMessage(owner.id, { agentId: id, sender: 'user', content: `q${i}` });
      await t.platform.services.agentsWeb.recordMessage(owner.id, {
        agentId: id,
        sender: 'agent',
        content: `a${i}`,
        responseMs: 100 * (i + 1),
        failed: i === 2,
      });
    }
    const page = (await web('GET', `/api/agents/${id}/messages?limit=2&offset=1`, owner.cookie)).json();
    expect(page).toMatchObject({ total: 6, limit: 2, offset: 1, status: 'ok' });
    expect(page.messages).toHaveLength(2);
    expect(page.messages[0]).toEqual({
      id: expect.any(String),
      agentId: id,
      sender: expect.any(String),
      content: expect.any(String),
      timestamp: expect.any(String),
      platform: 'web',
      session: null,
    });
    const all = (await web('GET', `/api/agents/${id}/messages`, owner.cookie)).json();
    expect(all.limit).toBe(50);
    expect(all.messages).toHaveLength(6);
  });

  it('stats: live from the driver, message figures from stored messages', async () => {
    const res = (await web('GET', `/api/agents/${id}/stats`, owner.cookie)).json();
    expect(res.status).toBe('ok');
    expect(res.stats).toMatchObject({
      agentId: id,
      cpu: 1.5,
      memory: 50_000_000,
      memoryPercent: 2.5,
      network: { rxBytes: 10, txBytes: 20 },
      status: 'healthy',
      pids: 1,
      messagesProcessed: 7,
      averageResponseTime: 200,
    });
    expect(res.stats.uptimeFormatted).toMatch(/^\d+h \d+m \d+s$/);
  });

  it("instance lifecycle: stop, start, restart act on the user's agents", async () => {
    const stop = await web('POST', `/api/instance/${owner.id}/stop`, owner.cookie, {});
    expect(stop.statusCode).toBe(200);
    expect(stop.json()).toEqual({ success: true, action: 'stop', userId: owner.id, agents: [{ id, status: 'stopped' }] });
    // stopping revoked the agent's key: starting deploys it again with a fresh one (docs/agents.md "Model access")
    expect((await web('POST', `/api/instance/${owner.id}/start`, owner.cookie, { agentId: id })).json().agents).toEqual([
      { id, status: 'provisioning' },
    ]);
    await eventually(async () => (await web('GET', `/api/agents/${id}`, owner.cookie)).json().agent?.status === 'running');
    // a restart deploys it again from its stored record (a saved configuration applies: docs/agents.md "Stop, suspend and restart")
    const deploys = t.driver.deploys.length;
    const noBody = await web('POST', `/api/instance/${owner.id}/restart`, owner.cookie);
    expect(noBody.json(), noBody.body).toMatchObject({ agents: [{ id, status: 'provisioning' }] });
    await eventually(async () => (await web('GET', `/api/agents/${id}`, owner.cookie)).json().agent?.status === 'running');
    expect(t.driver.deploys.length).toBe(deploys + 1);
    expect((await web('POST', `/api/instance/${owner.id}/restart`)).statusCode).toBe(401);
  });

  it('DELETE removes the agent and its hosting unit', async () => {
    const other = await provisionRunning(owner.cookie, 'Disposable');
    const res = await web('DELETE', `/api/agents/${other}`, owner.cookie);
    expect(res.json()).toEqual({ success: true, id: other, deleted: true });
    expect((await web('GET', `/api/agents/${other}`, owner.cookie)).statusCode).toBe(404);
    expect(t.driver.units.has(other)).toBe(false);
  });
});

describe('clone and preflight', () => {
  it('POST /api/agents/clone is always 501; GET gives service info; preflight is 404', async () => {
    const u = await subscriber(t);
    for (const cookie of [undefined, u.cookie]) {
      const res = await web('POST', '/api/agents/clone', cookie, { agentId: 'x', pay: 100 });
      expect(res.statusCode).toBe(501);
      expect(res.json()).toMatchObject({ status: 'unavailable', error: expect.any(String), message: expect.any(String) });
    }
    expect((await web('GET', '/api/agents/clone')).json()).toEqual({
      service: expect.any(String),
      version: '0.1.0',
      protocol: expect.any(String),
      clonePrice: expect.any(String),
      chainId: expect.any(Number),
    });
    expect((await web('GET', '/api/agents/preflight', u.cookie)).statusCode).toBe(404);
  });
});

describe('bad input: 4xx JSON, never 5xx', () => {
  let u: Awaited<ReturnType<typeof subscriber>>;
  beforeAll(async () => {
    u = await subscriber(t, 'label');
  });
  it.each([
    ['POST', '/api/agents/provision', {}],
    ['POST', '/api/agents/provision', { name: '' }],
    ['POST', '/api/agents/provision', { name: 42 }],
    ['POST', '/api/agents/provision', { name: 'x'.repeat(65) }],
    ['POST', '/api/agents/provision', { name: 'ok', tier: 'platinum' }],
    ['POST', '/api/agents/provision', { name: 'ok', config: 'nope' }],
    ['POST', '/api/agents/provision', { name: 'ok', model: '' }],
    ['POST', '/api/agents/provision', [1, 2]],
    ['PATCH', '/api/agents/whatever', {}],
    ['PATCH', '/api/agents/whatever', { name: null }],
    ['PUT', '/api/agents/whatever/config', [1]],
    ['GET', '/api/agents/whatever/logs?limit=abc', undefined],
    ['GET', '/api/agents/whatever/logs?limit=0', undefined],
    ['GET', '/api/agents/whatever/logs?level=loud', undefined],
    ['GET', '/api/agents/whatever/messages?offset=-1', undefined],
    ['GET', `/api/agents/${'x'.repeat(300)}`, undefined],
    ['GET', "/api/agents/'; drop table agents; --", undefined],
    ['POST', '/api/instance/me/explode', {}],
    ['POST', '/api/instance/x/start', { agentId: 5 }],
  ] as [Method, string, unknown][])('%s %s %j', async (method, url, body) => {
    const res = await web(method, url, u.cookie, body);
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(typeof res.json().error).toBe('string');
  });

  it('a non-JSON body is 400', async () => {
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/agents/provision',
      headers: { cookie: u.cookie, 'content-type': 'application/json' },
      payload: '{oops',
    });
    expect(res.statusCode).toBe(400);
  });

  it.each([
    ['POST', '/api/agents', { name: '' }],
    ['POST', '/api/agents', { name: 'ok', config: { plan: 'GOLD!' } }],
    ['POST', '/api/deployments', { name: 'ok', agentId: 'Not Valid' }],
    ['POST', '/api/deployments', { name: 'ok', config: [1] }],
    ['PUT', '/api/agents/x', { plan: 5 }],
    ['GET', '/api/deployments/not-a-uuid', undefined],
    ['GET', '/api/runtime-instances?limit=1000', undefined],
    ['GET', '/api/agents/x/logs?limit=-5', undefined],
  ] as ['GET' | 'POST' | 'PUT', string, unknown][])('backend %s %s %j', async (method, url, body) => {
    const res = await t.backend.inject({
      method,
      url,
      headers: { authorization: `Bearer ${t.config.INTERNAL_API_KEY}`, 'x-user-id': u.id },
      ...(body !== undefined ? { payload: body as object } : {}),
    });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(typeof res.json().error).toBe('string');
  });
});

describe('backend unreachable', () => {
  it('provisioning answers 500 and the agent shows error; stats answer a mock', async () => {
    const closedPort = await freePort();
    const off = await startAgentsPlatform({ env: { BACKEND_URL: `http://127.0.0.1:${closedPort}` } });
    // the web app of `off` points at a port nobody listens on
    try {
      const u = await subscriber(off, 'label');
      const res = await off.web.inject({
        method: 'POST',
        url: '/api/agents/provision',
        headers: { cookie: u.cookie },
        payload: { name: 'Lonely' },
      });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toMatchObject({ error: 'Provisioning failed', agentId: expect.any(String) });
      const agentId = res.json().agentId as string;
      const got = await off.web.inject({ method: 'GET', url: `/api/agents/${agentId}`, headers: { cookie: u.cookie } });
      expect(got.json().agent.status).toBe('error');
      const stats = await off.web.inject({ method: 'GET', url: `/api/agents/${agentId}/stats`, headers: { cookie: u.cookie } });
      expect(stats.statusCode).toBe(200);
      expect(stats.json()).toMatchObject({ status: 'mock', stats: { agentId, cpu: 0, memory: 0, status: 'error' } });
      const logs = await off.web.inject({ method: 'GET', url: `/api/agents/${agentId}/logs`, headers: { cookie: u.cookie } });
      expect(logs.statusCode).toBe(500);
      // the rest keeps working
      expect((await off.web.inject({ method: 'GET', url: '/api/agents', headers: { cookie: u.cookie } })).json().count).toBe(1);
    } finally {
      await off.close();
    }
  });
});
