/**
 * What an agent may do to the platform through the gateway proxy (docs/agents.md "Agent content
 * and streams"), against a fake agent gateway that behaves as a hostile agent would:
 * - N6: its answers never run as a page on the platform's origin, its cookies and origin-wide
 *   headers never reach the browser, the caller's cookies never reach it;
 * - N10: the proxied WebSocket is bounded (message size, bytes waiting for the agent, sockets per user);
 * - N12: sign-out and API key deletion end the live-log streams, proxied WebSockets and proxied
 *   streaming answers opened with that session or key;
 * - N26: a redirect it answers stays within its own paths on the platform (docs/security.md
 *   findings N6, N10, N12, N26);
 * and what a client may send it: a chat body nested too deep is the platform's 400, not a 500.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { encryptSecret } from '../../src/lib/crypto.ts';
import { signUp, startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

const GATEWAY_TOKEN = 'gw-token-containment-0123456789abcdef';
const HOSTILE_PAGE = `<!doctype html><title>x</title><script>fetch('/api/keys',{method:'POST',headers:{'content-type':'application/json'},body:'{"name":"planted"}'})</script>`;

type FakeAgent = {
  url: string;
  /** request headers the agent saw, by path */
  seen: Map<string, IncomingMessage['headers']>;
  /** sizes of the WebSocket messages the agent received */
  wsMessages: number[];
  /** delay before the agent accepts a WebSocket upgrade (ms) */
  upgradeDelayMs: number;
  /** chat completions bodies the agent received, as bytes */
  chatBodies: Buffer[];
  close(): Promise<void>;
};

/** A gateway that answers like a hostile agent: HTML with a script, cookies, origin-wide headers. */
async function startFakeAgent(): Promise<FakeAgent> {
  const seen = new Map<string, IncomingMessage['headers']>();
  const wsMessages: number[] = [];
  const server: Server = createServer((req, res) => {
    if (req.headers.authorization !== `Bearer ${GATEWAY_TOKEN}`) {
      res.writeHead(401).end();
      return;
    }
    const path = (req.url ?? '').split('?')[0]!;
    seen.set(path, req.headers);
    const hostile = {
      'set-cookie': 'service-session=agent-chosen; Path=/',
      'clear-site-data': '"cookies", "storage"',
      'content-security-policy': "script-src 'unsafe-inline' *",
      'strict-transport-security': 'max-age=31536000',
      'access-control-allow-origin': 'https://evil.example',
      'access-control-allow-credentials': 'true',
      'x-agent-header': 'kept',
    };
    if (path === '/v1/page') {
      res.writeHead(200, { ...hostile, 'content-type': 'text/html; charset=utf-8' }).end(HOSTILE_PAGE);
    } else if (path === '/v1/svg') {
      res.writeHead(200, { 'content-type': 'image/svg+xml' }).end('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>');
    } else if (path === '/v1/untyped') {
      res.writeHead(200).end(HOSTILE_PAGE);
    } else if (path === '/v1/json') {
      res.writeHead(200, { ...hostile, 'content-type': 'application/json' }).end('{"data":[]}');
    } else if (path === '/v1/redirect') {
      // the status and Location (and other headers) the test asks for
      const q = new URL(req.url ?? '', 'http://x').searchParams;
      const headers: Record<string, string> = { 'content-type': 'text/plain', refresh: '0; url=https://evil.example/refresh' };
      if (q.has('to')) headers.location = q.get('to')!;
      headers['content-location'] = 'https://evil.example/content';
      res.writeHead(Number(q.get('status') ?? 302), headers).end(q.get('status') === '304' ? undefined : 'moved');
    } else if (path === '/v1/chat/completions') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        agent.chatBodies.push(Buffer.concat(chunks));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"choices":[{"message":{"role":"assistant","content":"ok"}}]}');
      });
    } else if (path === '/v1/stream') {
      // an answer that never ends on its own
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write('data: {"tick":1}\n\n'), 50);
      res.on('close', () => clearInterval(timer));
    } else {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"nope"}');
    }
  });
  // the agent accepts any message size: what must not pass is the platform's to stop
  const wss = new WebSocketServer({ noServer: true, maxPayload: 200 * 1024 * 1024 });
  const agent: FakeAgent = { url: '', seen, wsMessages, upgradeDelayMs: 0, chatBodies: [], close: async () => {} };
  server.on('upgrade', (req, socket, head) => {
    if (req.headers.authorization !== `Bearer ${GATEWAY_TOKEN}`) {
      socket.destroy();
      return;
    }
    seen.set('/ws', req.headers);
    setTimeout(() => {
      if (socket.destroyed) return;
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on('message', (data: Buffer, binary) => {
          wsMessages.push(data.length);
          if (!binary) ws.send(JSON.stringify({ type: 'reply', content: `echo ${data.length}` }));
        });
      });
    }, agent.upgradeDelayMs);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  agent.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  agent.close = async () => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  };
  return agent;
}

let t: TestPlatform;
let fake: FakeAgent;
let webUrl: string;
let agentSeq = 0;

/** A user of `p` with a running agent whose gateway is the fake, and an `sk_` key. */
async function owner(p: TestPlatform = t) {
  const user = await signUp(p.web);
  const agentId = `agent-contain-${agentSeq++}`;
  await sql`INSERT INTO agents (id, user_id, name, status, subdomain, url, gateway_url)
            VALUES (${agentId}, ${user.id}, 'Hostile', 'running', ${agentId}, ${fake.url}, ${fake.url})`.execute(p.database.db.kysely);
  await sql`INSERT INTO agent_credentials (agent_id, user_id, gateway_token_enc)
            VALUES (${agentId}, ${user.id}, ${encryptSecret(TEST_SECRETS.secretsEncryptionKey, GATEWAY_TOKEN)})`.execute(
    p.database.db.kysely,
  );
  const created = await p.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie: user.cookie }, payload: { name: 'k' } });
  expect(created.statusCode).toBe(201);
  return { ...user, agentId, key: created.json().key as string, keyId: created.json().id as string };
}

beforeAll(async () => {
  fake = await startFakeAgent();
  t = await startTestPlatform({ LIVE_LOGS_INTERVAL_MS: '100', REGISTER_RATE_LIMIT: '100000' });
  await t.web.listen({ host: '127.0.0.1', port: 0 });
  webUrl = `http://127.0.0.1:${(t.web.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});

const SANDBOX_CSP = "sandbox; default-src 'none'";

describe('N6: agent answers never run on the platform origin', () => {
  it('text/html with a script from the agent → a download (application/octet-stream, attachment), sandboxed, nosniff, no agent cookie or origin-wide header', async () => {
    const o = await owner();
    const res = await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/v1/page`, headers: { cookie: o.cookie } });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe(HOSTILE_PAGE); // the bytes are the agent's, unchanged
    expect(res.headers['content-type']).toBe('application/octet-stream');
    expect(res.headers['content-disposition']).toBe('attachment');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['content-security-policy']).toBe(SANDBOX_CSP);
    for (const h of [
      'set-cookie',
      'clear-site-data',
      'strict-transport-security',
      'access-control-allow-origin',
      'access-control-allow-credentials',
    ]) {
      expect(res.headers[h], h).toBeUndefined();
    }
    expect(res.headers['x-agent-header']).toBe('kept');
  });

  it('SVG and untyped answers are downloads too; JSON and event streams keep their type, with the same headers', async () => {
    const o = await owner();
    for (const path of ['svg', 'untyped']) {
      const res = await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/v1/${path}`, headers: { cookie: o.cookie } });
      expect(res.headers['content-type'], path).toBe('application/octet-stream');
      expect(res.headers['content-disposition'], path).toBe('attachment');
      expect(res.headers['content-security-policy'], path).toBe(SANDBOX_CSP);
    }
    const json = await t.web.inject({
      method: 'GET',
      url: `/api/agents/${o.agentId}/v1/json`,
      headers: { authorization: `Bearer ${o.key}` },
    });
    expect(json.headers['content-type']).toBe('application/json');
    expect(json.headers['content-disposition']).toBeUndefined();
    expect(json.headers['x-content-type-options']).toBe('nosniff');
    expect(json.headers['content-security-policy']).toBe(SANDBOX_CSP);
    expect(json.headers['set-cookie']).toBeUndefined();
    expect(json.json()).toEqual({ data: [] });
    // a 404 of the agent is the agent's answer, under the same rules
    const missing = await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/v1/none`, headers: { cookie: o.cookie } });
    expect(missing.statusCode).toBe(404);
    expect(missing.headers['content-security-policy']).toBe(SANDBOX_CSP);
  });

  it('the per-agent host <id>.<AGENTS_DOMAIN> answers under the same rules', async () => {
    const o = await owner();
    const res = await t.web.inject({
      method: 'GET',
      url: '/v1/page',
      headers: { host: `${o.agentId}.${t.config.AGENTS_DOMAIN}`, authorization: `Bearer ${o.key}` },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/octet-stream');
    expect(res.headers['content-disposition']).toBe('attachment');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['content-security-policy']).toBe(SANDBOX_CSP);
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it("the platform's cookies and the caller's credentials never reach the agent (HTTP and WebSocket)", async () => {
    const o = await owner();
    const res = await t.web.inject({
      method: 'GET',
      url: `/api/agents/${o.agentId}/v1/json`,
      headers: { cookie: `${o.cookie}; other=1`, 'proxy-authorization': 'Basic eDp5' },
    });
    expect(res.statusCode).toBe(200);
    const seen = fake.seen.get('/v1/json')!;
    expect(seen.cookie).toBeUndefined();
    expect(seen['proxy-authorization']).toBeUndefined();
    expect(seen.authorization).toBe(`Bearer ${GATEWAY_TOKEN}`);
    expect(JSON.stringify(seen)).not.toContain(o.token);

    fake.seen.delete('/ws');
    const { socket } = await openSocket(o.agentId, { cookie: o.cookie });
    await until(() => fake.seen.has('/ws'));
    socket.close();
    const ws = fake.seen.get('/ws')!;
    expect(ws.cookie).toBeUndefined();
    expect(ws.authorization).toBe(`Bearer ${GATEWAY_TOKEN}`);
  });
});

describe('N26: a redirect from the agent stays within its own paths', () => {
  /** The proxied answer to the agent's `status` with `Location: to` (none when undefined). */
  const redirect = async (o: { agentId: string; cookie: string }, to: string | undefined, status = 302, from = 'v1/redirect') =>
    t.web.inject({
      method: 'GET',
      url: `/api/agents/${o.agentId}/${from}?status=${status}${to === undefined ? '' : `&to=${encodeURIComponent(to)}`}`,
      headers: { cookie: o.cookie },
    });

  it('a redirect to another site (absolute, scheme-relative, backslashed, another scheme) is not passed on: 502 with a sentence, no Location', async () => {
    const o = await owner();
    for (const to of [
      'https://evil.example/phish',
      '//evil.example/phish',
      '/\\evil.example/phish',
      '\\\\evil.example',
      'javascript:alert(1)',
      'https://evil.example@127.0.0.1/x',
      `${t.config.PUBLIC_URL}/dashboard`,
      `${t.config.PUBLIC_URL}/api/agents/someone-else/v1/x`,
    ]) {
      for (const status of [301, 302, 303, 307, 308]) {
        const res = await redirect(o, to, status);
        expect(res.statusCode, `${status} ${to}`).toBe(502);
        expect(res.headers.location, to).toBeUndefined();
        expect(res.json()).toEqual({
          error: `The agent answered a redirect (${status}) to a place outside its own paths; the platform does not pass it on`,
        });
      }
    }
    // a redirect status without any Location is not a redirect to nowhere either
    expect((await redirect(o, undefined, 302)).statusCode).toBe(502);
  });

  it("a relative Location, or one on the agent's gateway or the platform under its prefix, is rewritten under /api/agents/<id>/", async () => {
    const o = await owner();
    const prefix = `/api/agents/${o.agentId}`;
    for (const [to, expected] of [
      ['next?x=1#h', `${prefix}/v1/next?x=1#h`],
      ['/v1/other', `${prefix}/v1/other`],
      ['../../../../dashboard', `${prefix}/dashboard`],
      ['/%2e%2e/%2e%2e/api/keys', `${prefix}/api/keys`],
      ['//', undefined],
      [`${fake.url}/v1/from-gateway?y=2`, `${prefix}/v1/from-gateway?y=2`],
      [`${t.config.PUBLIC_URL}${prefix}/v1/absolute`, `${prefix}/v1/absolute`],
    ] as const) {
      const res = await redirect(o, to, 303);
      if (expected === undefined) {
        expect(res.statusCode, to).toBe(502);
        continue;
      }
      expect(res.statusCode, to).toBe(303);
      expect(res.headers.location, to).toBe(expected);
      expect(res.body).toBe('moved');
    }
  });

  it('Refresh and Content-Location never pass; a Location off the agent on a non-redirect status is dropped, the answer kept; 304 passes', async () => {
    const o = await owner();
    const created = await redirect(o, 'https://evil.example/created', 201);
    expect(created.statusCode).toBe(201);
    expect(created.headers.location).toBeUndefined();
    expect(created.body).toBe('moved');
    for (const res of [created, await redirect(o, 'next', 302)]) {
      expect(res.headers.refresh).toBeUndefined();
      expect(res.headers['content-location']).toBeUndefined();
      expect(res.headers['content-security-policy']).toBe(SANDBOX_CSP);
    }
    expect((await redirect(o, undefined, 304)).statusCode).toBe(304);
  });

  it('on the per-agent host the agent is at the root: a relative Location stays a path there, another site is refused', async () => {
    const o = await owner();
    const host = { host: `${o.agentId}.${t.config.AGENTS_DOMAIN}`, authorization: `Bearer ${o.key}` };
    const inside = await t.web.inject({ method: 'GET', url: `/v1/redirect?status=302&to=${encodeURIComponent('next')}`, headers: host });
    expect(inside.statusCode).toBe(302);
    expect(inside.headers.location).toBe('/v1/next');
    // a path the browser would read as another host never leaves as one
    const slashes = await t.web.inject({
      method: 'GET',
      url: `/v1/redirect?status=302&to=${encodeURIComponent(`${fake.url}//evil.example/x`)}`,
      headers: host,
    });
    expect(slashes.statusCode).toBe(302);
    expect(slashes.headers.location).toBe('/evil.example/x');
    const away = await t.web.inject({
      method: 'GET',
      url: `/v1/redirect?status=302&to=${encodeURIComponent('https://evil.example/phish')}`,
      headers: host,
    });
    expect(away.statusCode).toBe(502);
    expect(away.headers.location).toBeUndefined();
  });
});

describe('a chat completions body nested too deep (arrays and objects over 64 levels)', () => {
  const chat = (o: { agentId: string; key: string }, payload: string) =>
    t.web.inject({
      method: 'POST',
      url: `/api/agents/${o.agentId}/v1/chat/completions`,
      headers: { authorization: `Bearer ${o.key}`, 'content-type': 'application/json' },
      payload,
    });
  /** A chat body with `extra` in field `x`: one level for the body itself, then extra's. */
  const body = (extra: string, model = '"gpt-x"') => `{"model":${model},"messages":[{"role":"user","content":"hi"}],"x":${extra}}`;
  const arrays = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
  const objects = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;

  it.each([
    ['5000-deep arrays', body(arrays(5000))],
    ['20000-deep objects', body(objects(20000))],
    ['4000-deep arrays', body(arrays(4000))],
    ['65 levels in all', body(arrays(64))],
    ['deep in a message, without a model', `{"messages":[{"role":"user","content":${objects(100)}}]}`],
  ])('%s: 400 in OpenAI’s error shape, the agent never called', async (_name, payload) => {
    const o = await owner();
    const before = fake.chatBodies.length;
    const res = await chat(o, payload);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      error: {
        message: 'The request body is nested deeper than 64 levels of arrays and objects',
        type: 'invalid_request_error',
        param: null,
        code: null,
      },
    });
    expect(res.headers['content-security-policy']).toBe(SANDBOX_CSP);
    expect(fake.chatBodies.length).toBe(before);
  });

  it('64 levels, and brackets and escaped quotes inside strings, pass to the agent byte for byte', async () => {
    const o = await owner();
    const tricky = JSON.stringify(`\\" ${'['.repeat(5000)} "\\ {{{{ "]]`);
    for (const payload of [body(arrays(63)), body(`[${tricky},${arrays(10)}]`), body(`{"s":"\\\\"}`)]) {
      const res = await chat(o, payload);
      expect(res.statusCode, payload.slice(0, 80)).toBe(200);
      expect(fake.chatBodies.at(-1)!.toString('utf8')).toBe(payload);
    }
    // `default` is still set to the agent's stored model (docs/agents.md "Model"), the rest unchanged
    const res = await chat(o, body(arrays(20), '"default"'));
    expect(res.statusCode).toBe(200);
    const stored = await t.database.db.kysely.selectFrom('agents').select('model').where('id', '=', o.agentId).executeTakeFirstOrThrow();
    expect(JSON.parse(fake.chatBodies.at(-1)!.toString('utf8'))).toMatchObject({ model: stored.model, x: JSON.parse(arrays(20)) });
  });

  it('another user’s agent is still 404 before the body is looked at', async () => {
    const o = await owner();
    const other = await owner();
    const res = await t.web.inject({
      method: 'POST',
      url: `/api/agents/${o.agentId}/v1/chat/completions`,
      headers: { authorization: `Bearer ${other.key}`, 'content-type': 'application/json' },
      payload: body(arrays(5000)),
    });
    expect(res.statusCode).toBe(404);
  });
});

type Opened = { socket: WebSocket; closed: Promise<{ code: number; at: number }>; messages: string[] };

function openSocket(agentId: string, headers: Record<string, string>, base = webUrl): Promise<Opened> {
  const socket = new WebSocket(`${base.replace(/^http/, 'ws')}/api/agents/${agentId}/ws`, { headers });
  const messages: string[] = [];
  socket.on('message', (d) => messages.push(d.toString()));
  const closed = new Promise<{ code: number; at: number }>((resolve) => socket.on('close', (code) => resolve({ code, at: Date.now() })));
  return new Promise((resolve, reject) => {
    socket.on('open', () => resolve({ socket, closed, messages }));
    socket.on('unexpected-response', (_req, res) => {
      res.resume();
      reject(new Error(`HTTP ${res.statusCode}`));
    });
    socket.on('error', reject);
  });
}

/** `p`, or a failure after `ms`. */
const within = <T>(p: Promise<T>, ms = 3000) =>
  Promise.race([p, new Promise<never>((_r, reject) => setTimeout(() => reject(new Error(`not within ${ms} ms`)), ms))]);

const until = async (check: () => boolean, ms = 3000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('N10: the proxied WebSocket is bounded', () => {
  it('a message over 256 KiB closes the socket with 1009 at the platform; the agent never gets it', async () => {
    const o = await owner();
    const { socket, closed, messages } = await openSocket(o.agentId, { authorization: `Bearer ${o.key}` });
    socket.send(JSON.stringify({ type: 'chat', content: 'small' }));
    await until(() => messages.length === 1);
    const before = fake.wsMessages.length;
    socket.send(Buffer.alloc(256 * 1024 + 1, 0x61));
    const { code } = await within(closed);
    expect(code).toBe(1009);
    expect(fake.wsMessages.length).toBe(before);
    expect(Math.max(...fake.wsMessages)).toBeLessThanOrEqual(256 * 1024);
  });

  it('a message at the limit passes', async () => {
    const o = await owner();
    const { socket, messages } = await openSocket(o.agentId, { authorization: `Bearer ${o.key}` });
    socket.send(Buffer.alloc(256 * 1024, 0x61), { binary: false });
    await until(() => messages.length === 1);
    expect(messages[0]).toContain(`echo ${256 * 1024}`);
    socket.close();
  });

  it('while the agent has not accepted the socket yet, at most 1 MiB waits; more closes the socket (1013) and nothing is forwarded', async () => {
    const o = await owner();
    fake.upgradeDelayMs = 1500;
    try {
      const before = fake.wsMessages.length;
      const { socket, closed } = await openSocket(o.agentId, { authorization: `Bearer ${o.key}` });
      const sentAt = Date.now();
      for (let i = 0; i < 5; i++) socket.send(Buffer.alloc(250 * 1024, 0x62));
      const { code, at } = await within(closed);
      expect(code).toBe(1013);
      expect(at - sentAt).toBeLessThan(1500); // the platform closed it, not waiting for the agent
      await new Promise((r) => setTimeout(r, 1700));
      expect(fake.wsMessages.length).toBe(before);
    } finally {
      fake.upgradeDelayMs = 0;
    }
  });

  it('32 proxied sockets per user at once; the 33rd is 429 until one closes; another user is not affected', async () => {
    const o = await owner();
    const other = await owner();
    const open: Opened[] = [];
    try {
      for (let i = 0; i < 32; i++) open.push(await openSocket(o.agentId, { authorization: `Bearer ${o.key}` }));
      await expect(openSocket(o.agentId, { authorization: `Bearer ${o.key}` })).rejects.toThrow('HTTP 429');
      await expect(openSocket(o.agentId, { cookie: o.cookie })).rejects.toThrow('HTTP 429');
      const theirs = await openSocket(other.agentId, { authorization: `Bearer ${other.key}` });
      theirs.socket.close();
      open.pop()!.socket.close();
      // the slot is given back when the socket is closed
      let again: Opened | undefined;
      const end = Date.now() + 3000;
      while (!again && Date.now() < end) {
        again = await openSocket(o.agentId, { authorization: `Bearer ${o.key}` }).catch(() => undefined);
        if (!again) await new Promise((r) => setTimeout(r, 20));
      }
      expect(again).toBeDefined();
      open.push(again!);
    } finally {
      for (const s of open) s.socket.close();
    }
  });
});

/** An SSE answer read over a real socket: its text so far, and when it ended. */
function openStream(path: string, headers: Record<string, string>, base = webUrl) {
  const state = { text: '', status: 0, ended: undefined as number | undefined };
  const req = httpRequest(`${base}${path}`, { headers }, (res) => {
    state.status = res.statusCode ?? 0;
    res.setEncoding('utf8');
    res.on('data', (c: string) => (state.text += c));
    res.on('close', () => (state.ended ??= Date.now()));
  });
  req.on('error', () => (state.ended ??= Date.now()));
  req.end();
  return { state, abort: () => req.destroy() };
}

describe('N12: revoking a session or a key ends what was opened with it', () => {
  it('sign-out ends the live-log stream and the proxied WebSocket of that session within a second; other sessions keep theirs', async () => {
    const o = await owner();
    const login = await t.web.inject({ method: 'POST', url: '/api/auth/login', payload: { email: o.email, password: o.password } });
    const otherCookie = `service-session=${/service-session=([^;]+)/.exec(String(login.headers['set-cookie']))![1]}`;
    const mine = openStream(`/api/logs/${o.agentId}/stream`, { cookie: o.cookie });
    const kept = openStream(`/api/logs/${o.agentId}/stream`, { cookie: otherCookie });
    const socket = await openSocket(o.agentId, { cookie: o.cookie });
    const keptSocket = await openSocket(o.agentId, { cookie: otherCookie });
    await until(() => mine.state.text.includes(': connected') && kept.state.text.includes(': connected'));

    const signedOutAt = Date.now();
    expect((await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: o.cookie } })).statusCode).toBe(200);
    await until(() => mine.state.ended !== undefined, 1000);
    expect(mine.state.text).toContain('event: end\ndata: {"reason":"Credentials revoked"}');
    const { code, at } = await within(socket.closed);
    expect(code).toBe(1008);
    expect(at - signedOutAt).toBeLessThan(1000);

    await new Promise((r) => setTimeout(r, 300));
    expect(kept.state.ended).toBeUndefined();
    expect(keptSocket.socket.readyState).toBe(WebSocket.OPEN);
    kept.abort();
    keptSocket.socket.close();
  });

  it('deleting an API key ends the proxied WebSocket and streaming answer opened with it within a second; another key keeps its socket', async () => {
    const o = await owner();
    const second = await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie: o.cookie }, payload: { name: 'second' } });
    const otherKey = second.json().key as string;
    const socket = await openSocket(o.agentId, { authorization: `Bearer ${o.key}` });
    const keptSocket = await openSocket(o.agentId, { authorization: `Bearer ${otherKey}` });
    const stream = openStream(`/api/agents/${o.agentId}/v1/stream`, { authorization: `Bearer ${o.key}` });
    await until(() => stream.state.text.includes('tick'));

    const deletedAt = Date.now();
    expect((await t.web.inject({ method: 'DELETE', url: `/api/keys/${o.keyId}`, headers: { cookie: o.cookie } })).statusCode).toBe(200);
    const { code, at } = await within(socket.closed);
    expect(code).toBe(1008);
    expect(at - deletedAt).toBeLessThan(1000);
    await until(() => stream.state.ended !== undefined, 1000);

    await new Promise((r) => setTimeout(r, 200));
    expect(keptSocket.socket.readyState).toBe(WebSocket.OPEN);
    keptSocket.socket.send(JSON.stringify({ type: 'chat', content: 'still here' }));
    await until(() => keptSocket.messages.length === 1);
    keptSocket.socket.close();
  });

  it('nothing stays watched once the streams and sockets are closed', async () => {
    const revoker = (t.web as unknown as { streamRevoker: { size: number } }).streamRevoker;
    await until(() => revoker.size === 0);
  });

  it.skipIf(!process.env.REDIS_URL)(
    'across replicas (REDIS_URL): sign-out and key deletion on one web app end what is open on another',
    async () => {
      const shared = await startTestPlatform({
        REDIS_URL: process.env.REDIS_URL!,
        LIVE_LOGS_INTERVAL_MS: '100',
        REGISTER_RATE_LIMIT: '100000',
      });
      const replica = await shared.platform.buildWebApp();
      let stream: ReturnType<typeof openStream> | undefined;
      try {
        await replica.listen({ host: '127.0.0.1', port: 0 });
        const replicaUrl = `http://127.0.0.1:${(replica.server.address() as AddressInfo).port}`;
        const o = await owner(shared);
        await new Promise((r) => setTimeout(r, 200)); // the replica's subscriptions are established
        stream = openStream(`/api/logs/${o.agentId}/stream`, { cookie: o.cookie }, replicaUrl);
        const { state } = stream;
        const socket = await openSocket(o.agentId, { authorization: `Bearer ${o.key}` }, replicaUrl);
        await until(() => state.text.includes(': connected'));

        await shared.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: o.cookie } });
        await until(() => state.ended !== undefined, 1000);
        expect(state.text).toContain('"reason":"Credentials revoked"');
        expect(socket.socket.readyState).toBe(WebSocket.OPEN); // the key was not revoked

        const login = await shared.web.inject({
          method: 'POST',
          url: '/api/auth/login',
          payload: { email: o.email, password: o.password },
        });
        const cookie = `service-session=${/service-session=([^;]+)/.exec(String(login.headers['set-cookie']))![1]}`;
        await shared.web.inject({ method: 'DELETE', url: `/api/keys/${o.keyId}`, headers: { cookie } });
        expect((await within(socket.closed, 1000)).code).toBe(1008);
      } finally {
        stream?.abort();
        await replica.close();
        await shared.close();
      }
    },
  );
});
