/**
 * One model per agent (docs/agents.md "Model"; §4.7 provisioning, §4.9 catalog): on the live
 * platform (real sockets, the local driver with the built-in runtime, the fake OpenAI-compatible
 * router as the only provider), the model an agent shows everywhere (list, record, configuration,
 * its `v1/models`) is one catalog id, and it is the id the provider is called with. §4.7's names
 * map by the owner's plan; a model that cannot run is refused with the ones that can; a change of
 * model reaches the provider at the next message, without a restart.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LivePlatform, liveUsers, startLivePlatform } from '../helpers/live-platform.ts';
import { eventually } from './helpers.ts';

let live: LivePlatform;
const { api, signIn, cookies } = liveUsers(() => live.webUrl);

const running = (who: string, agentId: string) =>
  eventually(
    async () => {
      const a = (await api(who, 'GET', `/api/agents/${agentId}`)).body.agent;
      if (a?.status === 'error') throw new Error('the agent failed to start');
      return a?.status === 'running' ? a : null;
    },
    90_000,
    200,
  );

/** The models the fake provider was asked for by chat completions since `from`. */
const modelsCalled = (from: number) =>
  live.upstream.requests
    .slice(from)
    .filter((r) => r.path.endsWith('/chat/completions'))
    .map((r) => r.body?.model);

async function chat(who: string, agentId: string, message: string) {
  const r = await api(who, 'POST', '/api/chat', { agentId, message });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

beforeAll(async () => {
  live = await startLivePlatform({
    ADMIN_EMAILS: 'admin@example.com',
    ADMIN_EMAILS_REQUIRE_VERIFIED: 'false',
    AI_CUSTOM_MODEL: 'house-model',
  });
  await signIn('admin', 'admin@example.com');
  await signIn('solo', 'solo@example.com');
}, 120_000);

afterAll(async () => {
  await live?.close();
});

describe('one model per agent', () => {
  let agentId: string;
  let model: string;

  it('GET /api/agents/models lists what can run and the default an omitted model maps to', async () => {
    const admin = await api('admin', 'GET', '/api/agents/models');
    expect(admin.status).toBe(200);
    // an admin's plan allows every model; the router serves them all: the most capable Claude model is the default
    expect(admin.body.default).toBe('anthropic/claude-opus-4.1');
    expect(admin.body.models.map((m: { id: string }) => m.id)).toContain('anthropic/claude-opus-4.1');
    expect(admin.body.count).toBe(admin.body.models.length);

    // solo allows three models, none of them Claude: the default is the plan's own pick, one of its three
    const solo = await api('solo', 'GET', '/api/agents/models');
    expect(solo.body.count).toBe(3);
    const soloIds = solo.body.models.map((m: { id: string }) => m.id);
    expect(soloIds).toContain(solo.body.default);
    expect(solo.body.default).not.toMatch(/^anthropic\//);
  });

  it('an agent provisioned without a model shows one catalog id everywhere, and the provider is called with it', async () => {
    const prov = await api('admin', 'POST', '/api/agents/provision', { name: 'Model truth' });
    expect(prov.status).toBe(201);
    agentId = prov.body.agent.id;
    model = prov.body.agent.model;
    expect(model).toBe('anthropic/claude-opus-4.1');

    const a = await running('admin', agentId);
    expect(a.model).toBe(model);
    const list = (await api('admin', 'GET', '/api/agents')).body.agents.find((x: { id: string }) => x.id === agentId);
    expect(list.model).toBe(model);
    expect((await api('admin', 'GET', `/api/agents/${agentId}/config`)).body.config.agents.defaults.model).toBe(model);
    const v1 = await fetch(`${live.webUrl}/api/agents/${agentId}/v1/models`, { headers: { cookie: cookies.admin! } });
    expect(((await v1.json()) as { data: { id: string }[] }).data[0]!.id).toBe(model);

    const from = live.upstream.requests.length;
    const reply = await chat('admin', agentId, 'which model?');
    expect(reply.content ?? reply.response ?? JSON.stringify(reply)).toMatch(/which model\?/);
    expect(modelsCalled(from)).toEqual([model]);
  }, 120_000);

  it("the openai client through the agent proxy: `default` and the listed id both run the agent's model", async () => {
    const key = await api('admin', 'POST', '/api/keys', { name: 'model truth' });
    expect(key.status).toBe(201);
    const client = new OpenAI({ apiKey: key.body.key, baseURL: `${live.webUrl}/api/agents/${agentId}/v1` });
    const listed = await client.models.list();
    expect(listed.data.map((m) => m.id)).toEqual([model, 'default']);
    for (const name of ['default', model]) {
      const from = live.upstream.requests.length;
      const done = await client.chat.completions.create({ model: name, messages: [{ role: 'user', content: `hi ${name}` }] });
      expect(done.choices[0]!.message.content).toContain(`hi ${name}`);
      expect(done.model).toBe(model);
      expect(modelsCalled(from)).toEqual([model]);
    }
  }, 60_000);

  it('a change of model through the configuration applies at the next message, without a restart', async () => {
    const config = (await api('admin', 'GET', `/api/agents/${agentId}/config`)).body.config;
    const put = await api('admin', 'PUT', `/api/agents/${agentId}/config`, {
      ...config,
      agents: { ...config.agents, defaults: { ...config.agents.defaults, model: 'openai/gpt-4.1' } },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const a = (await api('admin', 'GET', `/api/agents/${agentId}`)).body.agent;
    expect(a.model).toBe('openai/gpt-4.1');
    expect(a.status).toBe('running');
    const from = live.upstream.requests.length;
    await chat('admin', agentId, 'after the change');
    expect(modelsCalled(from)).toEqual(['openai/gpt-4.1']);
    model = 'openai/gpt-4.1';
  }, 60_000);

  it('a model that cannot run is refused with the ones that can, and nothing changes', async () => {
    const config = (await api('admin', 'GET', `/api/agents/${agentId}/config`)).body.config;
    const bad = await api('admin', 'PUT', `/api/agents/${agentId}/config`, {
      ...config,
      agents: { ...config.agents, defaults: { ...config.agents.defaults, model: 'acme/nonexistent-9' } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('MODEL_CANNOT_RUN');
    expect(bad.body.error).toMatch(/^Model acme\/nonexistent-9 cannot run: .*Models that can run: .*anthropic\/claude-opus-4\.1/);
    expect((await api('admin', 'GET', `/api/agents/${agentId}`)).body.agent.model).toBe(model);

    // provisioning: a model outside the solo plan
    const before = (await api('solo', 'GET', '/api/agents')).body.count;
    const refused = await api('solo', 'POST', '/api/agents/provision', { name: 'Too grand', model: 'anthropic/claude-opus-4.1' });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatch(/your plan does not include it/);
    expect(refused.body.models).toHaveLength(3);
    expect((await api('solo', 'GET', '/api/agents')).body.count).toBe(before);

    // the custom provider is not configured here
    const custom = await api('admin', 'POST', '/api/agents/provision', { name: 'Custom', model: 'custom' });
    expect(custom.status).toBe(400);
    expect(custom.body.error).toMatch(/AI_CUSTOM_BASE_URL/);
  }, 60_000);

  it('§4.7 names map by plan: gpt-4 runs the best OpenAI model the plan allows', async () => {
    const prov = await api('admin', 'POST', '/api/agents/provision', { name: 'GPT', model: 'gpt-4' });
    expect(prov.status).toBe(201);
    expect(prov.body.agent.model).toBe('openai/gpt-4.1');
    const solo = await api('solo', 'POST', '/api/agents/provision', { name: 'Solo GPT', model: 'gpt-4' });
    expect(solo.status).toBe(201);
    const soloModels = (await api('solo', 'GET', '/api/agents/models')).body.models.map((m: { id: string }) => m.id);
    expect(soloModels).toContain(solo.body.agent.model);
    // among the solo plan's models, the OpenAI one
    expect(solo.body.agent.model).toMatch(/^openai\//);
    for (const id of [prov.body.agent.id, solo.body.agent.id]) {
      const who = id === prov.body.agent.id ? 'admin' : 'solo';
      await running(who, id);
      expect((await api(who, 'DELETE', `/api/agents/${id}`)).status).toBe(200);
    }
  }, 180_000);
});
