/**
 * The agent's persona (docs/agents.md "Persona"; §4.7 agent configuration, §4.12 heartbeat) on
 * the live platform: real sockets, the real local driver with the built-in runtime, and the fake
 * OpenAI-compatible upstream that records what reaches the model. `systemPrompt` and the heartbeat
 * prompt are validated and round-trip through PUT/GET /api/agents/:id/config; after the agent's
 * Restart the runtime sends the system prompt as the first system message of a chat (ahead of
 * the caller's own), of a WebSocket chat turn and of a heartbeat, whose user message is the
 * configured heartbeat prompt. A Restart deploys the agent again from its stored configuration, so
 * a prompt saved since applies from the next chat (docs/agents.md "Stop, suspend and restart").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { LIMITS } from '../../src/config/limits.ts';
import { decryptSecret } from '../../src/lib/crypto.ts';
import { type LivePlatform, liveUsers, startLivePlatform } from '../helpers/live-platform.ts';
import { TEST_SECRETS } from '../helpers/platform.ts';
import { eventually } from './helpers.ts';

let live: LivePlatform;
const { api, signIn } = liveUsers(() => live.webUrl);

/** The agent running and its gateway answering (after a deploy: its new address). */
const runningAgent = (agentId: string) =>
  eventually(
    async () => {
      const a = (await api('owner', 'GET', `/api/agents/${agentId}`)).body.agent;
      if (a?.status === 'error') throw new Error('the agent failed to start');
      if (a?.status !== 'running') return null;
      const row = await live.database.db.kysely
        .selectFrom('agents')
        .select('gateway_url')
        .where('id', '=', agentId)
        .executeTakeFirstOrThrow();
      const ok = await fetch(`${row.gateway_url}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      return ok ? row.gateway_url! : null;
    },
    90_000,
    200,
  );

beforeAll(async () => {
  live = await startLivePlatform({ ADMIN_EMAILS: 'owner@example.com' });
  await signIn('owner', 'owner@example.com');
  await signIn('other', 'other@example.com');
}, 120_000);

afterAll(async () => {
  await live?.close();
});

describe('persona: systemPrompt and the heartbeat prompt', () => {
  let agentId: string;
  const persona = 'You are Ada, a terse assistant. Answer in one sentence.';
  const heartbeatPrompt = 'Check the build and reply HEARTBEAT_OK.';

  it('provision an agent', async () => {
    const prov = await api('owner', 'POST', '/api/agents/provision', { name: 'Persona agent' });
    expect(prov.status).toBe(201);
    agentId = prov.body.agent.id;
    await runningAgent(agentId);
  }, 120_000);

  it('PUT config refuses a persona key that is not a string or too long, with a clear error, and stores nothing', async () => {
    const before = (await api('owner', 'GET', `/api/agents/${agentId}/config`)).body.config;
    const cases: [unknown, RegExp][] = [
      [{ systemPrompt: 42 }, /^systemPrompt must be a string/],
      [{ systemPrompt: ['a'] }, /^systemPrompt must be a string/],
      [
        { systemPrompt: 'x'.repeat(LIMITS.agentSystemPromptMax + 1) },
        new RegExp(`^systemPrompt must be at most ${LIMITS.agentSystemPromptMax}`),
      ],
      [{ agents: { defaults: { heartbeat: { prompt: { text: 'hi' } } } } }, /^agents\.defaults\.heartbeat\.prompt must be a string/],
      [
        { agents: { defaults: { heartbeat: { prompt: 'x'.repeat(LIMITS.agentHeartbeatPromptMax + 1) } } } },
        /^agents\.defaults\.heartbeat\.prompt must be at most/,
      ],
    ];
    for (const [body, error] of cases) {
      const r = await api('owner', 'PUT', `/api/agents/${agentId}/config`, body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.body.error).toMatch(error);
    }
    expect((await api('owner', 'GET', `/api/agents/${agentId}/config`)).body.config).toEqual(before);
  }, 60_000);

  it('PUT config stores systemPrompt and the heartbeat prompt (at the limit), GET returns them; null clears', async () => {
    const long = 'y'.repeat(LIMITS.agentSystemPromptMax);
    const put = await api('owner', 'PUT', `/api/agents/${agentId}/config`, { systemPrompt: long, logging: { level: 'info' } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ status: 'updated', config: { systemPrompt: long } });
    expect((await api('owner', 'GET', `/api/agents/${agentId}/config`)).body.config.systemPrompt).toBe(long);

    const cleared = await api('owner', 'PUT', `/api/agents/${agentId}/config`, { systemPrompt: null });
    expect(cleared.status).toBe(200);
    // the configuration always names the model that runs (docs/agents.md "Model")
    const model = (await api('owner', 'GET', `/api/agents/${agentId}`)).body.agent.model;
    expect((await api('owner', 'GET', `/api/agents/${agentId}/config`)).body.config).toEqual({
      systemPrompt: null,
      agents: { defaults: { model } },
    });

    const body = { systemPrompt: persona, agents: { defaults: { heartbeat: { prompt: heartbeatPrompt } } }, logging: { level: 'info' } };
    expect((await api('owner', 'PUT', `/api/agents/${agentId}/config`, body)).status).toBe(200);
    const got = await api('owner', 'GET', `/api/agents/${agentId}/config`);
    expect(got.body).toEqual({
      config: { ...body, agents: { defaults: { ...body.agents.defaults, model } } },
      status: 'ok',
    });
    // another user cannot read or write it
    expect((await api('other', 'GET', `/api/agents/${agentId}/config`)).status).toBe(404);
    expect((await api('other', 'PUT', `/api/agents/${agentId}/config`, { systemPrompt: 'mine' })).status).toBe(404);
    expect((await api('owner', 'GET', `/api/agents/${agentId}/config`)).body.config.systemPrompt).toBe(persona);
  }, 60_000);

  it('GET /api/agents/:id/models lists the catalog models the configuration can name (owner only)', async () => {
    const r = await api('owner', 'GET', `/api/agents/${agentId}/models`);
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(r.body.models.length);
    expect(r.body.models).toContainEqual(expect.objectContaining({ id: 'openai/gpt-4o-mini', provider: expect.any(String) }));
    expect((await api('other', 'GET', `/api/agents/${agentId}/models`)).status).toBe(404);
  }, 60_000);

  it('after a Restart the system prompt saved since is the first message of every chat and heartbeat', async () => {
    // the agent runs with the configuration it was deployed with (none); Restart deploys it again from the stored one
    const userId = (await api('owner', 'GET', '/api/auth/session')).body.user.id;
    const restart = await api('owner', 'POST', `/api/instance/${userId}/restart`, { agentId });
    expect(restart.status).toBe(200);
    expect(restart.body.agents).toEqual([{ id: agentId, status: 'provisioning' }]);
    const gateway = await runningAgent(agentId);

    live.upstream.reset();
    const chat = await api('owner', 'POST', `/api/agents/${agentId}/v1/chat/completions`, {
      messages: [
        { role: 'system', content: 'Caller instructions.' },
        { role: 'user', content: 'Who are you?' },
      ],
    });
    expect(chat.status).toBe(200);
    const sent = live.upstream.requests.find((r) => r.path.endsWith('/chat/completions'))!;
    expect(sent.body.messages).toEqual([
      { role: 'system', content: persona },
      { role: 'system', content: 'Caller instructions.' },
      { role: 'user', content: 'Who are you?' },
    ]);

    live.upstream.reset();
    const creds = await live.database.db.kysely
      .selectFrom('agent_credentials')
      .select('gateway_token_enc')
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    const token = decryptSecret(TEST_SECRETS.secretsEncryptionKey, creds.gateway_token_enc);
    const hb = await fetch(`${gateway}/v1/heartbeat`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ runId: 'persona-test' }),
    });
    expect(hb.status).toBe(200);
    const beat = live.upstream.requests.find((r) => r.path.endsWith('/chat/completions'))!;
    expect(beat.body.messages[0]).toEqual({ role: 'system', content: persona });
    expect(beat.body.messages.at(-1)).toEqual({ role: 'user', content: heartbeatPrompt });

    // the WebSocket chat: the persona first, then the socket's conversation
    live.upstream.reset();
    const socket = new WebSocket(`${gateway.replace(/^http/, 'ws')}/ws`, { headers: { authorization: `Bearer ${token}` } });
    const frame = await new Promise<{ type: string }>((resolve, reject) => {
      socket.on('open', () => socket.send(JSON.stringify({ type: 'chat', content: 'hello socket' })));
      socket.on('message', (raw) => {
        const f = JSON.parse(raw.toString());
        if (f.type === 'reply' || f.type === 'error') resolve(f);
      });
      socket.on('error', reject);
    });
    socket.close();
    expect(frame.type).toBe('reply');
    const ws = live.upstream.requests.find((r) => r.path.endsWith('/chat/completions'))!;
    expect(ws.body.messages).toEqual([
      { role: 'system', content: persona },
      { role: 'user', content: 'hello socket' },
    ]);
  }, 150_000);
  it('a prompt changed on a running agent applies from its next Restart, not before', async () => {
    const userId = (await api('owner', 'GET', '/api/auth/session')).body.user.id;
    const ask = async () => {
      live.upstream.reset();
      const chat = await api('owner', 'POST', `/api/agents/${agentId}/v1/chat/completions`, {
        messages: [{ role: 'user', content: 'Who?' }],
      });
      expect(chat.status).toBe(200);
      return live.upstream.requests.find((r) => r.path.endsWith('/chat/completions'))!.body.messages[0];
    };
    const renamed = 'You are Grace, a patient teacher.';
    expect((await api('owner', 'PUT', `/api/agents/${agentId}/config`, { systemPrompt: renamed })).status).toBe(200);
    // saved, not applied: the running process keeps the prompt it was deployed with
    expect(await ask()).toEqual({ role: 'system', content: persona });
    expect((await api('owner', 'POST', `/api/instance/${userId}/restart`, { agentId })).status).toBe(200);
    await runningAgent(agentId);
    expect(await ask()).toEqual({ role: 'system', content: renamed });
  }, 120_000);
});
