/**
 * End to end on real sockets with the real local driver and the built-in runtime: an admin signs
 * in, provisions, the agent runs and answers /healthz and a chat completion (its model is the
 * platform's AI gateway, in front of a local OpenAI-compatible fake), is renamed and restarted; after a platform restart
 * (apps, worker and driver closed; a new platform over the same database and DATA_DIR) it runs
 * again; then it is deleted.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptSecret } from '../../src/lib/crypto.ts';
import { eventually } from '../agents/helpers.ts';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';
import { TEST_SECRETS } from '../helpers/platform.ts';

let live: LivePlatform;

let cookie = '';
async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${live.webUrl}${path}`, {
    method,
    headers: { cookie, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const setCookie = res.headers.get('set-cookie');
  const m = setCookie ? /service-session=([^;]+)/.exec(setCookie) : null;
  if (m) cookie = `service-session=${m[1]}`;
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** the gateway's own address (agents report the platform's proxied WebSocket, docs/agents.md) */
const gatewayBase = async (agentId: string) =>
  (await live.database.db.kysely.selectFrom('agents').select('gateway_url').where('id', '=', agentId).executeTakeFirstOrThrow())
    .gateway_url!;

beforeAll(async () => {
  live = await startLivePlatform({ ADMIN_EMAILS: 'root@example.com' });
}, 120_000);

afterAll(async () => {
  await live?.close();
});

describe('agents end to end (local driver, built-in runtime)', () => {
  let agentId: string;
  let userId: string;

  it('an admin signs in and provisions; the agent reaches running and its /healthz answers', async () => {
    const reg = await api('POST', '/api/register', { email: 'root@example.com', password: 'correct horse battery' });
    expect(reg.status).toBe(201);
    userId = reg.body.id;
    expect((await api('POST', '/api/auth/login', { email: 'root@example.com', password: 'correct horse battery' })).status).toBe(200);

    const prov = await api('POST', '/api/agents/provision', { name: 'E2E agent', model: 'gpt-4' });
    expect(prov.status).toBe(201);
    expect(prov.body.agent.status).toBe('provisioning');
    agentId = prov.body.agent.id;

    const agent = await eventually(
      async () => {
        const r = await api('GET', `/api/agents/${agentId}`);
        if (r.body.agent?.status === 'error') throw new Error('provisioning failed');
        return r.body.agent?.status === 'running' ? r.body.agent : null;
      },
      60_000,
      200,
    );
    const health = await fetch(`${await gatewayBase(agent.id)}/healthz`);
    expect(await health.json()).toEqual({ ok: true, status: 'live' });
    // its configuration file may carry channel secrets: nobody but the agent may read it
    const configFile = join(live.config.DATA_DIR, 'agents', agentId, 'workspace', 'openclaw.json');
    expect(statSync(configFile).mode & 0o077).toBe(0);
  }, 90_000);

  it('a chat completion through the agent reaches the model upstream and returns', async () => {
    const agent = (await api('GET', `/api/agents/${agentId}`)).body.agent;
    const creds = await live.database.db.kysely
      .selectFrom('agent_credentials')
      .selectAll()
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    const token = decryptSecret(TEST_SECRETS.secretsEncryptionKey, creds.gateway_token_enc);
    const base = await gatewayBase(agent.id);
    const denied = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(denied.status).toBe(401);
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'ping' }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]!.message.content).toContain('ping');
    // through the platform's AI gateway (docs/agents.md "Model access"): the agent holds its own key,
    // the gateway forwards with the router key; `gpt-4` is no catalog model, so the plan's pick serves
    expect(live.upstream.requests.at(-1)!.authorization).toBe('Bearer router-test-key');
    expect(live.upstream.requests.at(-1)!.body.model).toBe('openai/gpt-4o-mini');
    await live.running()!.platform.services.ai.usage.flush();
    const usage = await live.database.db.kysely.selectFrom('ai_usage').selectAll().where('agent_id', '=', agentId).execute();
    expect(usage).toEqual([expect.objectContaining({ user_id: userId, model: 'openai/gpt-4o-mini', total_tokens: 15 })]);

    const logs = await api('GET', `/api/agents/${agentId}/logs`);
    expect(logs.status).toBe(200);
    expect(logs.body.logs.length).toBeGreaterThan(0);
    const stats = await api('GET', `/api/agents/${agentId}/stats`);
    expect(stats.body.status).toBe('ok');
    expect(stats.body.stats.pids).toBeGreaterThan(0);

    // §4.7 messages are the real conversation: the runtime reports each turn with its own key
    const deadline = Date.now() + 10_000;
    let messages: { sender: string; content: string; agentId: string }[] = [];
    while (Date.now() < deadline) {
      messages = (await api('GET', `/api/agents/${agentId}/messages`)).body.messages;
      if (messages.length >= 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(messages.map((m) => m.sender).sort()).toEqual(['agent', 'user']);
    expect(messages.find((m) => m.sender === 'user')!.content).toBe('ping');
    expect(messages.find((m) => m.sender === 'agent')!.content).toBe(body.choices[0]!.message.content);
    expect(messages.every((m) => m.agentId === agentId)).toBe(true);
  }, 30_000);

  it('rename and restart', async () => {
    const renamed = await api('PATCH', `/api/agents/${agentId}`, { name: 'Renamed agent' });
    expect(renamed.body).toMatchObject({ success: true, agent: { name: 'Renamed agent' } });
    const restart = await api('POST', `/api/instance/${userId}/restart`, { agentId });
    expect(restart.status).toBe(200);
    const agent = await eventually(
      async () => {
        const a = (await api('GET', `/api/agents/${agentId}`)).body.agent;
        if (a.status !== 'running') return null;
        const ok = await fetch(`${await gatewayBase(a.id)}/healthz`).then(
          (r) => r.ok,
          () => false,
        );
        return ok ? a : null;
      },
      60_000,
      200,
    );
    expect(agent.name).toBe('Renamed agent');
  }, 90_000);

  it('after a platform restart the running agent runs again', async () => {
    await live.stop();
    await live.start();
    const agent = await eventually(
      async () => {
        const a = (await api('GET', `/api/agents/${agentId}`)).body.agent;
        if (a?.status !== 'running') return null;
        const ok = await fetch(`${await gatewayBase(a.id)}/healthz`).then(
          (r) => r.ok,
          () => false,
        );
        return ok ? a : null;
      },
      90_000,
      250,
    );
    expect(agent.id).toBe(agentId);
  }, 120_000);

  it('delete removes the agent and stops its process', async () => {
    const base = await gatewayBase(agentId);
    const del = await api('DELETE', `/api/agents/${agentId}`);
    expect(del.body).toEqual({ success: true, id: agentId, deleted: true });
    expect((await api('GET', `/api/agents/${agentId}`)).status).toBe(404);
    await eventually(
      async () =>
        !(await fetch(`${base}/healthz`).then(
          (r) => r.ok,
          () => false,
        )),
      20_000,
      200,
    );
  }, 30_000);
});
