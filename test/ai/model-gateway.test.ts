/**
 * The AI gateway agents call for their model (docs/agents.md "Model access"; docs/security.md N5): an agent
 * holds its own `apk_` key and the gateway's address, never ROUTER_API_KEY; the owner's plan decides
 * the models, the quota applies, each agent has its own limit, every call is usage of the owner with
 * the agent and the model, and stopping or deleting the agent kills the key. The official `openai`
 * client talks to it over real sockets; the providers are local fakes.
 */
import OpenAI, {
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
} from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig, MODEL_GATEWAY_PATH } from '../../src/config/env.ts';
import { agentEnvironment } from '../../src/domains/agents/drivers/agent-env.rules.ts';
import { aiRepo, entryOf } from '../../src/domains/ai/ai.repo.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { type FakeAnthropic, startFakeAnthropic } from '../fakes/anthropic-upstream.ts';
import { FAKE_USAGE, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';

const ROUTER_KEY = 'router-secret-key-of-the-operator';
const ANTHROPIC_KEY = 'anthropic-secret-key-of-the-operator';
const RATE_LIMIT = 40;

let t: AgentsTestPlatform;
let router: FakeOpenAi;
let anthropic: FakeAnthropic;
let gateway: string;
let solo: Awaited<ReturnType<typeof subscriber>>;
let network: Awaited<ReturnType<typeof subscriber>>;
let agent: Deployed;
let networkAgent: Deployed;

type Deployed = Awaited<ReturnType<typeof deploy>>;

/** An agent of `userId` deployed through the backend (the fake driver records its launch spec and key). */
async function deploy(userId: string, model = 'openai/gpt-4o-mini') {
  const res = await t.backend.inject({
    method: 'POST',
    url: '/api/deployments',
    headers: bearer(t),
    payload: { userId, name: 'Gateway user', plan: 'network', model },
  });
  expect(res.statusCode, res.body).toBe(202);
  const agentId = res.json().agent.id as string;
  const spec = await eventually(async () => t.driver.deploys.findLast((s) => s.agentId === agentId));
  await eventually(async () => (await agentRow(agentId))?.status === 'running');
  return { agentId, key: spec.platformApiKey, spec, userId };
}
const agentRow = (id: string) => t.database.db.kysely.selectFrom('agents').selectAll().where('id', '=', id).executeTakeFirst();

const client = (key: string) => new OpenAI({ apiKey: key, baseURL: gateway, maxRetries: 0 });
const hello = (content = 'hello gateway') => [{ role: 'user' as const, content }];
const post = (key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${gateway}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

async function usageRows(agentId: string) {
  await t.platform.services.ai.usage.flush();
  return t.database.db.kysely.selectFrom('ai_usage').selectAll().where('agent_id', '=', agentId).orderBy('id').execute();
}

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: ROUTER_KEY });
  anthropic = await startFakeAnthropic({ apiKey: ANTHROPIC_KEY });
  t = await startAgentsPlatform({
    env: {
      ROUTER_API_KEY: ROUTER_KEY,
      ROUTER_BASE_URL: router.url,
      ANTHROPIC_API_KEY: ANTHROPIC_KEY,
      ANTHROPIC_BASE_URL: anthropic.url,
      AI_QUOTA_ENFORCE: 'true',
      AGENT_GATEWAY_RATE_LIMIT: String(RATE_LIMIT),
    },
  });
  gateway = `${t.backendUrl}${MODEL_GATEWAY_PATH}`;
  solo = await subscriber(t, 'solo');
  network = await subscriber(t, 'network');
  agent = await deploy(solo.id);
  networkAgent = await deploy(network.id);
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

describe('what an agent is given', () => {
  it("the gateway's address and its own apk_ key as its model access; no value of its environment holds a provider key", async () => {
    const { spec } = agent;
    expect(spec.env?.AGENT_MODEL_BASE_URL).toBe(t.config.AGENT_GATEWAY_URL);
    expect(spec.env?.AGENT_MODEL_API_KEY).toBe(spec.platformApiKey);
    expect(spec.platformApiKey).toMatch(/^apk_/);
    // `default`: the gateway runs the agent's stored model at each call (docs/agents.md "Model")
    expect(spec.env?.AGENT_MODEL).toBe('default');
    const env = agentEnvironment(spec, { gatewayPort: 18789, gatewayUrl: 'http://127.0.0.1:18789' });
    for (const value of Object.values(env)) {
      expect(value).not.toContain(ROUTER_KEY);
      expect(value).not.toContain(ANTHROPIC_KEY);
    }
    expect(JSON.stringify(t.driver.deploys)).not.toContain(ROUTER_KEY);
  });

  it('`default` (and no model) is the agent’s stored model, read at each call; `auto` the plan’s pick', async () => {
    const row = await t.database.db.kysely
      .selectFrom('agents')
      .select('model')
      .where('id', '=', networkAgent.agentId)
      .executeTakeFirstOrThrow();
    for (const model of ['default', undefined]) {
      router.reset();
      const res = await post(networkAgent.key, { ...(model ? { model } : {}), messages: hello() });
      expect(res.status).toBe(200);
      expect(router.requests.filter((r) => r.path.endsWith('/chat/completions')).map((r) => r.body.model)).toEqual([row.model]);
    }
  });

  it('AGENT_GATEWAY_URL: the backend’s loopback port with the local driver, BACKEND_URL with the others; the setting wins', () => {
    const config = (env: Record<string, string>) => loadConfig(env, { readDotEnv: false }).AGENT_GATEWAY_URL;
    expect(config({ BACKEND_PORT: '4555' })).toBe('http://127.0.0.1:4555/api/agent-gateway/v1');
    expect(config({ BACKEND_PORT: '4555', HOST: '0.0.0.0' })).toBe('http://127.0.0.1:4555/api/agent-gateway/v1');
    expect(config({ HOSTING_DRIVER: 'render', BACKEND_URL: 'https://backend.example.com/' })).toBe(
      'https://backend.example.com/api/agent-gateway/v1',
    );
    expect(config({ AGENT_GATEWAY_URL: 'http://10.0.0.2:9000/gw/' })).toBe('http://10.0.0.2:9000/gw');
    expect(() => config({ AGENT_GATEWAY_URL: 'not a url' })).toThrow(/AGENT_GATEWAY_URL/);
  });
});

describe('chat completions with the agent key', () => {
  it('an allowed model: 200 in OpenAI’s shape, the provider sees the platform’s key, usage is recorded with user, agent and model', async () => {
    const completion = await client(agent.key).chat.completions.create({ model: 'openai/gpt-4o-mini', messages: hello() });
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe('openai/gpt-4o-mini');
    expect(completion.choices[0]!.message).toMatchObject({ role: 'assistant', content: 'Echo: hello gateway' });
    expect(completion.usage).toEqual(FAKE_USAGE);
    expect(router.requests).toHaveLength(1);
    expect(router.requests[0]!.authorization).toBe(`Bearer ${ROUTER_KEY}`);
    expect(router.requests[0]!.body.model).toBe('openai/gpt-4o-mini');
    const rows = await usageRows(agent.agentId);
    expect(rows.at(-1)).toMatchObject({
      user_id: solo.id,
      agent_id: agent.agentId,
      model: 'openai/gpt-4o-mini',
      provider: 'router',
      total_tokens: FAKE_USAGE.total_tokens,
    });
  });

  it('tool definitions, tool calls and tool results pass through; options outside the allow-list (a router’s `models`) do not', async () => {
    const tools = [{ type: 'function', function: { name: 'clock', description: 'time', parameters: { type: 'object', properties: {} } } }];
    const messages = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'what time is it?' }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'clock', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '12:00' },
      { role: 'user', content: 'thanks' },
    ];
    const res = await post(agent.key, {
      model: 'deepseek/deepseek-chat',
      messages,
      tools,
      tool_choice: 'auto',
      temperature: 0.2,
      stop: null,
      models: ['openai/o1-pro'],
      provider: { order: ['expensive'] },
      plugins: [{ id: 'web' }],
    });
    expect(res.status).toBe(200);
    const sent = router.requests[0]!.body;
    expect(sent.model).toBe('deepseek/deepseek-chat');
    expect(sent.messages).toEqual(messages);
    expect(sent.tools).toEqual(tools);
    expect(sent.tool_choice).toBe('auto');
    expect(sent.temperature).toBe(0.2);
    for (const dropped of ['models', 'provider', 'plugins', 'stop']) expect(sent).not.toHaveProperty(dropped);
  });

  it('`auto` (or no model) is the plan’s pick, and the answer names the model that served', async () => {
    expect((await client(agent.key).chat.completions.create({ model: 'auto', messages: hello() })).model).toBe('openai/gpt-4o-mini');
    const res = await post(agent.key, { messages: hello() });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { model: string }).model).toBe('openai/gpt-4o-mini');
  });

  it('a model outside the owner’s plan is 403 and one the catalog does not know 404, in OpenAI’s shape; the provider is not called', async () => {
    const err = await client(agent.key)
      .chat.completions.create({ model: 'anthropic/claude-opus-4.1', messages: hello() })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermissionDeniedError);
    expect((err as PermissionDeniedError).error).toMatchObject({
      type: 'permission_error',
      code: 'model_restricted',
      message: 'This model is not available on your plan',
      allowedModels: ['openai/gpt-4o-mini', 'google/gemini-2.5-flash', 'deepseek/deepseek-chat'],
    });
    const unknown = await client(networkAgent.key)
      .chat.completions.create({ model: 'vendor/no-such-model', messages: hello() })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect((unknown as NotFoundError).error).toMatchObject({ type: 'not_found_error', code: 'model_not_found' });
    expect(router.requests).toHaveLength(0);
  });

  it('GET /models lists the owner’s plan in OpenAI’s list shape', async () => {
    const ids = (await client(agent.key).models.list()).data.map((m) => m.id);
    expect(ids).toEqual(['openai/gpt-4o-mini', 'google/gemini-2.5-flash', 'deepseek/deepseek-chat']);
    const all = (await client(networkAgent.key).models.list()).data.map((m) => m.id);
    expect(all).toContain('anthropic/claude-opus-4.1');
    expect(all).toContain('anthropic/claude-sonnet-4-5');
  });

  it('a provider refusing the request itself (400) passes its message on and is not retried; a failing provider falls back, then 500', async () => {
    router.failWith = 400;
    const bad = await client(agent.key)
      .chat.completions.create({ model: 'openai/gpt-4o-mini', messages: hello() })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(BadRequestError);
    expect((bad as BadRequestError).error).toMatchObject({ message: 'upstream failure', type: 'invalid_request_error' });
    expect(router.requests).toHaveLength(1);
    router.reset();
    router.failWith = 502;
    const down = await client(agent.key)
      .chat.completions.create({ model: 'openai/gpt-4o-mini', messages: hello() })
      .catch((e: unknown) => e);
    expect(down).toBeInstanceOf(InternalServerError);
    expect((down as InternalServerError).error).toMatchObject({ type: 'server_error', code: 'ai_provider_error' });
    expect(router.requests.map((r) => r.body.model)).toEqual(['openai/gpt-4o-mini', 'google/gemini-2.5-flash']);
  });

  it('a text-only provider (Anthropic type) answers in the same wire format; tools for it are a 400', async () => {
    const c = await client(networkAgent.key).chat.completions.create({
      model: 'anthropic/claude-sonnet-4-5',
      messages: hello('hi claude'),
    });
    expect(c.model).toBe('anthropic/claude-sonnet-4-5');
    expect(c.choices[0]!.message.content).toContain('hi claude');
    expect(anthropic.requests[0]!.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    const stream = await client(networkAgent.key).chat.completions.create({
      model: 'anthropic/claude-sonnet-4-5',
      messages: hello('stream claude'),
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toContain('stream claude');
    const withTools = await client(networkAgent.key)
      .chat.completions.create({
        model: 'anthropic/claude-sonnet-4-5',
        messages: hello(),
        tools: [{ type: 'function', function: { name: 'x', parameters: { type: 'object' } } }],
      })
      .catch((e: unknown) => e);
    expect(withTools).toBeInstanceOf(BadRequestError);
    const rows = await usageRows(networkAgent.agentId);
    // a row holds the calls of one window alike (migration 200): count calls, not rows
    expect(rows.filter((r) => r.provider === 'anthropic').reduce((n, r) => n + r.requests, 0)).toBe(2);
  });
});

describe('streaming', () => {
  it('chunks through the openai client, the usage chunk when asked for, then [DONE]; the call is usage of the agent', async () => {
    const before = (await usageRows(agent.agentId)).length;
    const stream = await client(agent.key).chat.completions.create({
      model: 'openai/gpt-4o-mini',
      messages: hello('stream this please'),
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: unknown;
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      expect(chunk.model).toBe('openai/gpt-4o-mini');
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('Echo: stream this please');
    expect(usage).toEqual(FAKE_USAGE);
    expect(router.requests[0]!.authorization).toBe(`Bearer ${ROUTER_KEY}`);
    const rows = await usageRows(agent.agentId);
    expect(rows).toHaveLength(before + 1);
    expect(rows.at(-1)).toMatchObject({ user_id: solo.id, model: 'openai/gpt-4o-mini', total_tokens: FAKE_USAGE.total_tokens });
  });

  it('on the wire: text/event-stream, no usage chunk unless asked, `data: [DONE]` last', async () => {
    const res = await post(agent.key, { model: 'openai/gpt-4o-mini', messages: hello('raw'), stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await res.text();
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    const events = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]')
      .map((e) => JSON.parse(e.slice(6)) as { usage?: unknown; choices: unknown[] });
    expect(events.length).toBeGreaterThan(2);
    expect(events.every((e) => e.usage === undefined && e.choices.length > 0)).toBe(true);
  });

  it('a stream the agent aborts is still billed (from its length, the provider never sent a count)', async () => {
    const before = (await usageRows(agent.agentId)).length;
    router.holdStreams = true;
    const controller = new AbortController();
    const res = await fetch(`${gateway}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${agent.key}` },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: hello('a long prompt to be billed'), stream: true }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await router.waitForAbort();
    const rows = await eventually(async () => {
      const r = await usageRows(agent.agentId);
      return r.length > before ? r : null;
    });
    expect(rows.at(-1)!.total_tokens).toBeGreaterThan(0);
    expect(rows.at(-1)!.prompt_tokens).toBeGreaterThan(0);
  });
});

describe('the owner’s plan and the agent’s limits', () => {
  it('quota used up (AI_QUOTA_ENFORCE): 429 insufficient_quota in OpenAI’s shape', async () => {
    const owner = await subscriber(t, 'solo');
    const a = await deploy(owner.id);
    await aiRepo.insertUsage(t.database.db.pool, [
      entryOf({
        userId: owner.id,
        agentId: null,
        model: 'openai/gpt-4o-mini',
        provider: 'router',
        promptTokens: 1_000_000,
        completionTokens: 1_000_000,
        totalTokens: 2_000_000,
        cost: 1,
        priced: true,
        billTo: null,
        createdAt: new Date(),
      }),
    ]);
    const err = await client(a.key)
      .chat.completions.create({ model: 'openai/gpt-4o-mini', messages: hello() })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect((err as RateLimitError).error).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota', quota: 2_000_000 });
    expect(router.requests).toHaveLength(0);
  });

  it('an owner without an active subscription (a card processor is configured): 402', async () => {
    const owner = await subscriber(t, 'collective');
    const a = await deploy(owner.id);
    await t.database.db.kysely.updateTable('users').set({ subscription_status: 'canceled' }).where('id', '=', owner.id).execute();
    const res = await post(a.key, { model: 'openai/gpt-4o-mini', messages: hello() });
    expect(res.status).toBe(402);
    expect(await res.json()).toEqual({
      error: { message: 'An active subscription is required', type: 'insufficient_quota', code: 'subscription_required', param: null },
    });
  });

  it('AGENT_GATEWAY_RATE_LIMIT calls per minute per agent, not per address: the next is 429 with Retry-After, another agent goes on', async () => {
    const owner = await subscriber(t, 'network');
    const busy = await deploy(owner.id);
    const calm = await deploy(owner.id);
    const models = (key: string) => fetch(`${gateway}/models`, { headers: { authorization: `Bearer ${key}` } });
    for (let i = 0; i < RATE_LIMIT; i++) expect((await models(busy.key)).status).toBe(200);
    const limited = await models(busy.key);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await limited.json()) as { error: { type: string; code: string } }).error).toMatchObject({
      type: 'rate_limit_error',
      code: 'rate_limit_exceeded',
    });
    expect((await models(calm.key)).status).toBe(200);
  });
});

describe('the agent key', () => {
  it.each([
    ['no Authorization header', undefined, {}],
    ['not a Bearer token', undefined, { authorization: 'Basic abc' }],
    ['an unknown apk_ key', 'apk_not-a-real-key-000000000000000000000', {}],
    ['the platform’s internal key', 'test-internal-key', {}],
    ['the router key itself', ROUTER_KEY, {}],
  ])('401 invalid_api_key in OpenAI’s shape with %s, before the body is read', async (_label, key, headers) => {
    const res = await post(key, 'not json at all', headers);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: { message: 'Unauthorized', type: 'authentication_error', code: 'invalid_api_key', param: null },
    });
    const err = await client(key ?? 'none')
      .models.list()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthenticationError);
  });

  it('bad input is a 400 in OpenAI’s shape', async () => {
    const res = await post(agent.key, { model: 'openai/gpt-4o-mini', messages: [] });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: { message: 'messages must be a non-empty array', type: 'invalid_request_error', code: 'invalid_request', param: null },
    });
    expect((await post(agent.key, '{"messages":')).status).toBe(400);
  });

  it('stop revokes the key at once (cached or not); start deploys with a fresh one; delete revokes that one', async () => {
    const a = await deploy(network.id);
    expect((await post(a.key, { messages: hello() })).status).toBe(200); // verified, and so cached
    const h = { ...bearer(t), 'x-user-id': network.id };
    const stop = await t.backend.inject({ method: 'POST', url: `/api/agents/${a.agentId}/stop`, headers: h });
    expect(stop.json()).toMatchObject({ status: 'stopped' });
    expect((await post(a.key, { messages: hello() })).status).toBe(401);
    expect(
      (await t.database.db.kysely.selectFrom('agent_credentials').selectAll().where('agent_id', '=', a.agentId).executeTakeFirstOrThrow())
        .platform_key_hash,
    ).toBeNull();

    const start = await t.backend.inject({ method: 'POST', url: `/api/agents/${a.agentId}/start`, headers: h });
    expect(start.json()).toMatchObject({ status: 'provisioning', deployment: { action: 'deploy' } });
    const fresh = await eventually(async () => {
      const spec = t.driver.deploys.findLast((s) => s.agentId === a.agentId);
      return spec && spec.platformApiKey !== a.key && (await agentRow(a.agentId))?.status === 'running' ? spec : null;
    });
    expect(fresh.env?.AGENT_MODEL_API_KEY).toBe(fresh.platformApiKey);
    expect((await post(a.key, { messages: hello() })).status).toBe(401);
    expect((await post(fresh.platformApiKey, { messages: hello() })).status).toBe(200);

    const del = await t.backend.inject({ method: 'DELETE', url: `/api/agents/${a.agentId}`, headers: h });
    expect(del.statusCode).toBe(200);
    expect((await post(fresh.platformApiKey, { messages: hello() })).status).toBe(401);
  });
});

describe('GET /api/usage (web app)', () => {
  it("shows the owner the agent's calls", async () => {
    await client(agent.key).chat.completions.create({ model: 'google/gemini-2.5-flash', messages: hello() });
    await t.platform.services.ai.usage.flush();
    const mine = await t.database.db.kysely.selectFrom('ai_usage').selectAll().where('user_id', '=', solo.id).execute();
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((r) => r.agent_id === agent.agentId)).toBe(true);
    const res = await t.web.inject({ method: 'GET', url: '/api/usage?days=1', headers: { cookie: solo.cookie } });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.totals.requests).toBe(mine.reduce((n, r) => n + r.requests, 0));
    expect(body.totals.totalTokens).toBe(mine.reduce((n, r) => n + r.total_tokens, 0));
    expect(body.byModel.map((m: { model: string }) => m.model)).toEqual(
      expect.arrayContaining(['openai/gpt-4o-mini', 'google/gemini-2.5-flash']),
    );
  });
});
