/**
 * Talking to your agent, end to end on real sockets (docs/agents.md "Talk to your agent"): a real
 * local agent (built-in runtime) whose model is a local OpenAI-compatible fake, reached only
 * through the platform:
 * - the official `openai` client pointed at `/api/agents/:id/v1` with an `sk_` key (stream and not);
 * - §4.8 POST /api/gateway/chat (one WebSocket per request);
 * - §4.18 POST /api/chat, JSON and Server-Sent Events, with the turns in GET /api/agents/:id/messages;
 * - the WebSocket proxy the agent's `websocketUrl` names, and the `<id>.<AGENTS_DOMAIN>` host;
 * - another user's key or session gets 404, no credentials 401, a cross-site cookie WebSocket 403.
 */
import { request as httpRequest } from 'node:http';
import OpenAI, { AuthenticationError, NotFoundError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { eventually } from '../agents/helpers.ts';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';

let live: LivePlatform;

type Account = { cookie: string; key: string };

async function api(account: Partial<Account>, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${live.webUrl}${path}`, {
    method,
    headers: {
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(account.cookie ? { cookie: account.cookie } : {}),
      ...headers,
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return res;
}

async function signUp(email: string): Promise<Account> {
  const password = 'correct horse battery staple';
  expect((await api({}, 'POST', '/api/register', { email, password })).status).toBe(201);
  const login = await api({}, 'POST', '/api/auth/login', { email, password });
  expect(login.status).toBe(200);
  const cookie = `service-session=${/service-session=([^;]+)/.exec(login.headers.get('set-cookie') ?? '')![1]}`;
  const key = (await (await api({ cookie }, 'POST', '/api/keys', { name: 'talk' })).json()) as { key: string };
  return { cookie, key: key.key };
}

let owner: Account;
let stranger: Account;
let agentId: string;
let websocketUrl: string;

beforeAll(async () => {
  live = await startLivePlatform();
  owner = await signUp('owner@example.com');
  stranger = await signUp('stranger@example.com');
  const prov = await api(owner, 'POST', '/api/agents/provision', { name: 'Talker' });
  expect(prov.status).toBe(201);
  agentId = ((await prov.json()) as { agent: { id: string } }).agent.id;
  const agent = await eventually(
    async () => {
      const a = ((await (await api(owner, 'GET', `/api/agents/${agentId}`)).json()) as { agent?: { status: string; websocketUrl: string } })
        .agent;
      if (a?.status === 'error') throw new Error('provisioning failed');
      return a?.status === 'running' ? a : null;
    },
    60_000,
    200,
  );
  websocketUrl = agent.websocketUrl;
}, 120_000);

afterAll(async () => {
  await live?.close();
});

const client = (key: string, id = agentId) => new OpenAI({ apiKey: key, baseURL: `${live.webUrl}/api/agents/${id}/v1`, maxRetries: 0 });

describe('the gateway proxy with the official openai client and an sk_ key', () => {
  it('non-streaming chat completion', async () => {
    const completion = await client(owner.key).chat.completions.create({
      model: 'auto',
      messages: [{ role: 'user', content: 'ping over the proxy' }],
    });
    expect(completion.choices[0]!.message.content).toContain('ping over the proxy');
    // the model provider saw the platform's router key, never the caller's sk_ key
    expect(live.upstream.requests.at(-1)!.authorization).toBe('Bearer router-test-key');
  });

  it('streaming chat completion', async () => {
    const stream = await client(owner.key).chat.completions.create({
      model: 'auto',
      stream: true,
      messages: [{ role: 'user', content: 'stream me please' }],
    });
    let text = '';
    let chunks = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      chunks++;
    }
    expect(chunks).toBeGreaterThan(1);
    expect(text).toContain('stream me please');
  });

  it("another user's key gets 404, a wrong key 401, no credentials 401; the gateway token never reaches the caller", async () => {
    await expect(
      client(stranger.key).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toBeInstanceOf(NotFoundError);
    await expect(
      client('sk_not-a-real-key-000000000000').chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toBeInstanceOf(AuthenticationError);
    const anonymous = await api({}, 'POST', `/api/agents/${agentId}/v1/chat/completions`, { messages: [] });
    expect(anonymous.status).toBe(401);
    const strangerCookie = await api({ cookie: stranger.cookie }, 'POST', `/api/agents/${agentId}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(strangerCookie.status).toBe(404);
    const unknown = await api(owner, 'POST', `/api/agents/no-such-agent/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(unknown.status).toBe(404);
    // the owner's session cookie works too
    const viaCookie = await api({ cookie: owner.cookie }, 'POST', `/api/agents/${agentId}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'cookie call' }],
    });
    expect(viaCookie.status).toBe(200);
    const agentJson = await (await api(owner, 'GET', `/api/agents/${agentId}`)).text();
    const creds = await live.database.db.kysely
      .selectFrom('agent_credentials')
      .select('gateway_token_enc')
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(agentJson).not.toContain(creds.gateway_token_enc);
  });

  it('the agent reports the proxied WebSocket address, which chats with an sk_ key', async () => {
    expect(websocketUrl).toBe(`${live.webUrl.replace(/^http/, 'ws')}/api/agents/${agentId}/ws`);
    const socket = new WebSocket(websocketUrl, { headers: { authorization: `Bearer ${owner.key}` } });
    const reply = await new Promise<{ type: string; content: string }>((resolve, reject) => {
      socket.on('open', () => socket.send(JSON.stringify({ type: 'chat', content: 'hello socket' })));
      socket.on('message', (raw) => {
        const frame = JSON.parse(raw.toString());
        if (frame.type === 'reply' || frame.type === 'error') resolve(frame);
      });
      socket.on('error', reject);
    });
    socket.close();
    expect(reply).toMatchObject({ type: 'reply', content: expect.stringContaining('hello socket') });
  });

  it('a WebSocket with the session cookie from another site is refused (403); a stranger gets 404', async () => {
    const status = (headers: Record<string, string>) =>
      new Promise<number>((resolve) => {
        const socket = new WebSocket(websocketUrl, { headers });
        socket.on('unexpected-response', (_req, res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        socket.on('open', () => {
          socket.close();
          resolve(101);
        });
        socket.on('error', () => {});
      });
    expect(await status({ cookie: owner.cookie, origin: 'https://evil.example' })).toBe(403);
    expect(await status({ cookie: owner.cookie, origin: live.webUrl })).toBe(101);
    expect(await status({ authorization: `Bearer ${stranger.key}` })).toBe(404);
    expect(await status({})).toBe(401);
  });

  it('<id>.<AGENTS_DOMAIN> serves the same agent by Host', async () => {
    const port = new URL(live.webUrl).port;
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'by host' }] });
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/v1/chat/completions',
          headers: {
            host: `${agentId}.${live.config.AGENTS_DOMAIN}:${port}`,
            authorization: `Bearer ${owner.key}`,
            'content-type': 'application/json',
          },
        },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('by host');
  });
});

describe('§4.8 POST /api/gateway/chat and §4.18 POST /api/chat', () => {
  it('gateway chat answers {success, reply, agentId, agentName} over one WebSocket', async () => {
    const res = await api({ cookie: owner.cookie }, 'POST', '/api/gateway/chat', { message: 'gateway hello' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ success: true, reply: expect.stringContaining('gateway hello'), agentId, agentName: 'Talker' });
  });

  it('gateway chat: 400 without message, 401 without a session, 404 for a user without an agent', async () => {
    expect((await api({ cookie: owner.cookie }, 'POST', '/api/gateway/chat', {})).status).toBe(400);
    expect((await api({}, 'POST', '/api/gateway/chat', { message: 'x' })).status).toBe(401);
    const res = await api({ cookie: stranger.cookie }, 'POST', '/api/gateway/chat', { message: 'x' });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: string }).error).toBe('No agent found');
  });

  it('REST chat (JSON) answers and stores the turn', async () => {
    const res = await api({ cookie: owner.cookie }, 'POST', '/api/chat', { agentId, message: 'rest json turn' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { reply: string; agentId: string; agentName: string; responseMs: number };
    expect(body).toMatchObject({
      reply: expect.stringContaining('rest json turn'),
      agentId,
      agentName: 'Talker',
      responseMs: expect.any(Number),
    });
  });

  it('REST chat streams Server-Sent Events and the assembled streamed reply appears in the messages', async () => {
    const res = await api(
      { cookie: owner.cookie },
      'POST',
      '/api/chat',
      { agentId, message: 'rest streamed turn with several words' },
      { accept: 'text/event-stream' },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await res.text();
    const events = text
      .trim()
      .split('\n\n')
      .map((e) => ({ name: /^event: (.+)$/m.exec(e)![1], data: JSON.parse(/^data: (.+)$/m.exec(e)![1]!) }));
    const deltas = events.filter((e) => e.name === 'delta');
    expect(deltas.length).toBeGreaterThan(1);
    const done = events.at(-1)!;
    expect(done.name).toBe('done');
    expect(done.data.reply).toBe(deltas.map((d) => d.data.content).join(''));

    const messages = (await (await api(owner, 'GET', `/api/agents/${agentId}/messages`)).json()) as {
      messages: { sender: string; content: string }[];
    };
    expect(messages.messages).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ sender: 'user', content: 'rest streamed turn with several words' }),
        expect.objectContaining({ sender: 'agent', content: done.data.reply }),
      ]),
    );
  });

  it('REST chat: 400 for neither or both message forms, 404 for a stranger, 401 anonymous', async () => {
    expect((await api({ cookie: owner.cookie }, 'POST', '/api/chat', { agentId })).status).toBe(400);
    expect(
      (await api({ cookie: owner.cookie }, 'POST', '/api/chat', { agentId, message: 'a', messages: [{ role: 'user', content: 'b' }] }))
        .status,
    ).toBe(400);
    expect((await api({ cookie: stranger.cookie }, 'POST', '/api/chat', { agentId, message: 'x' })).status).toBe(404);
    expect((await api({}, 'POST', '/api/chat', { agentId, message: 'x' })).status).toBe(401);
  });
});

describe('§4.7 live logs: /api/logs/:agentId/stream, /history, /stop, /active', () => {
  const liveLogs = () => (live.running()!.web as unknown as { liveLogs: { counts(): { pollers: number; subscribers: number } } }).liveLogs;

  /** Opens a stream and returns a reader of its text with the connection's abort. */
  async function openStream(cookie: string) {
    const abort = new AbortController();
    const res = await fetch(`${live.webUrl}/api/logs/${agentId}/stream`, { headers: { cookie }, signal: abort.signal });
    const reader = res.body!.getReader();
    let text = '';
    const decoder = new TextDecoder();
    const readUntil = async (pattern: RegExp, timeoutMs = 20_000) => {
      const until = Date.now() + timeoutMs;
      while (!pattern.test(text)) {
        if (Date.now() > until) throw new Error(`stream never matched ${pattern}: ${text.slice(-500)}`);
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      return text;
    };
    return { res, readUntil, abort: () => abort.abort() };
  }

  it('a stream receives the lines the agent writes after it opened', async () => {
    const s = await openStream(owner.cookie);
    expect(s.res.status).toBe(200);
    expect(s.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await s.readUntil(/: connected/);
    expect(await (await api({ cookie: owner.cookie }, 'GET', `/api/logs/${agentId}/active`)).json()).toEqual({
      agentId,
      active: true,
      streams: 1,
    });
    // make the runtime write (chat turns are logged) until a line arrives: the reader's first
    // look only sets where "new" starts, and on a loaded machine it may come late
    const arrived = s.readUntil(/event: log\ndata: /, 45_000);
    let done = false;
    void arrived.then(
      () => (done = true),
      () => (done = true),
    );
    for (let i = 0; i < 60 && !done; i++) {
      await client(owner.key).chat.completions.create({ model: 'auto', messages: [{ role: 'user', content: `log me ${i}` }] });
      await new Promise((r) => setTimeout(r, 500));
    }
    const text = await arrived;
    const first = JSON.parse(/event: log\ndata: (.+)\n/.exec(text)![1]!);
    expect(first).toMatchObject({ agentId, timestamp: expect.any(String), level: expect.any(String), message: expect.any(String) });
    // stop ends it with an end event
    expect(await (await api({ cookie: owner.cookie }, 'POST', `/api/logs/${agentId}/stop`)).json()).toEqual({ agentId, stopped: 1 });
    await s.readUntil(/event: end\ndata: \{"reason":"Stopped"\}/);
    await eventually(async () => liveLogs().counts().subscribers === 0, 5000, 20);
  }, 60_000);

  it('100 connects and disconnects leave no reader and no listener behind', async () => {
    for (let i = 0; i < 100; i++) {
      const s = await openStream(owner.cookie);
      await s.readUntil(/: connected/);
      s.abort();
    }
    await eventually(
      async () => {
        const c = liveLogs().counts();
        return c.pollers === 0 && c.subscribers === 0;
      },
      10_000,
      20,
    );
    expect(await (await api({ cookie: owner.cookie }, 'GET', `/api/logs/${agentId}/active`)).json()).toEqual({
      agentId,
      active: false,
      streams: 0,
    });
  }, 60_000);

  it('history lists recent lines; a stranger gets 404 everywhere, no session 401', async () => {
    const h = await api({ cookie: owner.cookie }, 'GET', `/api/logs/${agentId}/history?limit=5`);
    expect(h.status).toBe(200);
    const body = (await h.json()) as { logs: unknown[]; limit: number; status: string };
    expect(body).toMatchObject({ limit: 5, status: 'ok' });
    expect(body.logs.length).toBeGreaterThan(0);
    for (const [method, path] of [
      ['GET', 'stream'],
      ['GET', 'history'],
      ['POST', 'stop'],
      ['GET', 'active'],
    ] as const) {
      expect((await api({ cookie: stranger.cookie }, method, `/api/logs/${agentId}/${path}`)).status).toBe(404);
      expect((await api({}, method, `/api/logs/${agentId}/${path}`)).status).toBe(401);
    }
    expect(liveLogs().counts().pollers).toBe(0);
  });
});
