/**
 * Connecting to an agent from outside the dashboard (docs/agents.md "Connect with the openai SDK"),
 * on real sockets with real local agents whose model is a local OpenAI-compatible fake:
 * - §4.7 GET /api/agents with an `sk_` key (§4.3) answers what the session cookie answers;
 * - the proxy's GET …/v1/models names the agent's model in the OpenAI list shape;
 * - a chat completion with `model: "default"` (or none) reaches the model provider as the agent's model.
 */
import OpenAI, { AuthenticationError, NotFoundError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';
import { eventually } from './helpers.ts';

let live: LivePlatform;
type Account = { cookie: string; key: string; keyId: string };

async function api(method: string, path: string, opts: { cookie?: string; key?: string; body?: unknown } = {}) {
  return fetch(`${live.webUrl}${path}`, {
    method,
    headers: {
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(opts.cookie ? { cookie: opts.cookie } : {}),
      ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
    },
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
  });
}

async function signUp(email: string): Promise<Account> {
  const password = 'correct horse battery staple';
  expect((await api('POST', '/api/register', { body: { email, password } })).status).toBe(201);
  const login = await api('POST', '/api/auth/login', { body: { email, password } });
  const cookie = `service-session=${/service-session=([^;]+)/.exec(login.headers.get('set-cookie') ?? '')![1]}`;
  const created = (await (await api('POST', '/api/keys', { cookie, body: { name: 'connect' } })).json()) as { key: string; id: string };
  return { cookie, key: created.key, keyId: created.id };
}

async function provisionRunning(account: Account, body: Record<string, unknown>) {
  const prov = await api('POST', '/api/agents/provision', { cookie: account.cookie, body });
  expect(prov.status).toBe(201);
  const id = ((await prov.json()) as { agent: { id: string } }).agent.id;
  await eventually(
    async () => {
      const a = ((await (await api('GET', `/api/agents/${id}`, account)).json()) as { agent?: { status: string } }).agent;
      if (a?.status === 'error') throw new Error('provisioning failed');
      return a?.status === 'running';
    },
    60_000,
    200,
  );
  return id;
}

let owner: Account;
let stranger: Account;
/** the owner's agent, on a model the platform's catalogue knows */
let agentId: string;
/** the stranger's agent, on the §4.7 default model (which the catalogue does not know: it runs as `auto`) */
let strangerAgentId: string;
const AGENT_MODEL = 'openai/gpt-4o-mini';

beforeAll(async () => {
  live = await startLivePlatform();
  owner = await signUp('connect-owner@example.com');
  stranger = await signUp('connect-stranger@example.com');
  [agentId, strangerAgentId] = await Promise.all([
    provisionRunning(owner, { name: 'Connected', model: AGENT_MODEL }),
    provisionRunning(stranger, { name: 'Theirs' }),
  ]);
}, 150_000);

afterAll(async () => {
  await live?.close();
});

const client = (key: string, id = agentId) => new OpenAI({ apiKey: key, baseURL: `${live.webUrl}/api/agents/${id}/v1`, maxRetries: 0 });

describe('§4.7 GET /api/agents with an sk_ key (§4.3)', () => {
  it("answers the key owner's agents exactly as the session cookie does", async () => {
    const withCookie = await api('GET', '/api/agents', { cookie: owner.cookie });
    const withKey = await api('GET', '/api/agents', { key: owner.key });
    expect(withKey.status).toBe(200);
    const listed = await withKey.json();
    expect(listed).toEqual(await withCookie.json());
    expect(listed).toMatchObject({ count: 1, status: 'ok', agents: [{ id: agentId, name: 'Connected', model: AGENT_MODEL }] });
    // another user's key lists that user's agents, never the owner's
    const theirs = (await (await api('GET', '/api/agents', { key: stranger.key })).json()) as { agents: { id: string }[] };
    expect(theirs.agents.map((a) => a.id)).toEqual([strangerAgentId]);
  });

  it('a wrong or deleted key is 401, even next to a valid session; no credentials stay an empty list (§4.7)', async () => {
    expect((await api('GET', '/api/agents', { key: 'sk_not-a-real-key-000000000000' })).status).toBe(401);
    expect((await api('GET', '/api/agents', { key: 'sk_not-a-real-key', cookie: owner.cookie })).status).toBe(401);
    const anonymous = await api('GET', '/api/agents');
    expect(anonymous.status).toBe(200);
    expect(await anonymous.json()).toEqual({ agents: [], count: 0, status: 'ok' });

    const spare = (await (await api('POST', '/api/keys', { cookie: owner.cookie, body: { name: 'spare' } })).json()) as {
      key: string;
      id: string;
    };
    expect((await api('GET', '/api/agents', { key: spare.key })).status).toBe(200);
    expect((await api('DELETE', `/api/keys/${spare.id}`, { cookie: owner.cookie })).status).toBe(200);
    await eventually(async () => (await api('GET', '/api/agents', { key: spare.key })).status === 401);
  });
});

describe('GET /api/agents/:id/v1/models', () => {
  it("lists the agent's model and the default alias in the OpenAI shape; the openai client reads it", async () => {
    const res = await api('GET', `/api/agents/${agentId}/v1/models`, { key: owner.key });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: { created: number }[] };
    const created = body.data[0]!.created;
    expect(body).toEqual({
      object: 'list',
      data: [
        { id: AGENT_MODEL, object: 'model', created, owned_by: 'agent-platform' },
        { id: 'default', object: 'model', created, owned_by: 'agent-platform' },
      ],
    });
    expect(Math.abs(created - Date.now() / 1000)).toBeLessThan(600);

    const models = [];
    for await (const m of client(owner.key).models.list()) models.push(m.id);
    expect(models).toEqual([AGENT_MODEL, 'default']);
    // the same with the session cookie
    expect(await (await api('GET', `/api/agents/${agentId}/v1/models`, { cookie: owner.cookie })).json()).toEqual(body);
  });

  it('names the model the agent runs: its §4.7 name mapped to a catalog id (docs/agents.md "Model")', async () => {
    const ids = [];
    for await (const m of client(stranger.key, strangerAgentId).models.list()) ids.push(m.id);
    const stored = await live.database.db.kysely
      .selectFrom('agents')
      .select('model')
      .where('id', '=', strangerAgentId)
      .executeTakeFirstOrThrow();
    expect(stored.model).toMatch(/^[a-z-]+\/[\w.-]+$/);
    expect(ids).toEqual([stored.model, 'default']);
  });

  it("no credentials 401, a wrong key 401, another user's agent 404 like an unknown one", async () => {
    expect((await api('GET', `/api/agents/${agentId}/v1/models`)).status).toBe(401);
    await expect(client('sk_not-a-real-key-000000000000').models.list()).rejects.toBeInstanceOf(AuthenticationError);
    await expect(client(stranger.key).models.list()).rejects.toBeInstanceOf(NotFoundError);
    expect((await api('GET', `/api/agents/${agentId}/v1/models`, { cookie: stranger.cookie })).status).toBe(404);
    expect((await api('GET', '/api/agents/no-such-agent/v1/models', { key: owner.key })).status).toBe(404);
  });
});

describe('model "default" on the proxied chat completions', () => {
  /** the model the fake provider was asked for in the request carrying `text` */
  const upstreamModelFor = (text: string) =>
    live.upstream.requests.find((r) => r.path === '/v1/chat/completions' && JSON.stringify(r.body.messages ?? []).includes(text))?.body
      .model;

  it("model 'default' through the openai client reaches the provider as the agent's model", async () => {
    const completion = await client(owner.key).chat.completions.create({
      model: 'default',
      messages: [{ role: 'user', content: 'default model please' }],
    });
    expect(completion.choices[0]!.message.content).toContain('default model please');
    expect(upstreamModelFor('default model please')).toBe(AGENT_MODEL);
  });

  it("no model at all is the agent's model too, streamed or not", async () => {
    const res = await api('POST', `/api/agents/${agentId}/v1/chat/completions`, {
      key: owner.key,
      body: { messages: [{ role: 'user', content: 'no model named' }] },
    });
    expect(res.status).toBe(200);
    expect(upstreamModelFor('no model named')).toBe(AGENT_MODEL);

    const stream = await client(owner.key).chat.completions.create({
      model: 'default',
      stream: true,
      messages: [{ role: 'user', content: 'streamed default' }],
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toContain('streamed default');
    expect(upstreamModelFor('streamed default')).toBe(AGENT_MODEL);
  });

  it('any other model passes through as it came', async () => {
    const other = 'google/gemini-2.5-flash';
    await client(owner.key).chat.completions.create({ model: other, messages: [{ role: 'user', content: 'named another model' }] });
    expect(upstreamModelFor('named another model')).toBe(other);
  });
});
