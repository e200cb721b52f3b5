/**
 * What an agent may do to the platform through the gateway proxy (docs/agents.md "Agent content
 * and streams"), against a fake agent gateway that behaves as a hostile agent would:
 * - N6: its answers never run as a page on the platform's origin, its cookies and origin-wide
 *   headers never reach the browser, the caller's cookies never reach it;
 * - N10: the proxied WebSocket is bounded (message size, bytes waiting for the agent, sockets per user);
 * - N12: sign-out and API key deletion end the live-log streams, proxied WebSockets and proxied
 *   streaming answers opened with that session or key (docs/security.md findings N6, N10, N12).
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
  const agent: FakeAgent = { url: '', seen, wsMessages, upgradeDelayMs: 0, close: async () => {} };
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
