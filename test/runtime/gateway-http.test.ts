/**
 * The built-in runtime's own HTTP layer (gateway-http.ts, model-client.ts, runtime-log.ts), over
 * real sockets against the fake model provider: what Fastify used to do for the gateway (auth
 * before the body, body limits and JSON errors, HEAD, 404, 503 while closing, upgrades through
 * the same guard) and what fetch did (streamed answers passed through, timeouts as 504, a
 * caller that leaves ends the provider's stream), and the log lines the local driver reads.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { type AddressInfo, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createGateway } from '../../src/runtime/gateway.ts';
import { BODY_LIMIT_BYTES } from '../../src/runtime/gateway-http.ts';
import { createFileLogger } from '../../src/runtime/runtime-log.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';

const token = 'h'.repeat(48);
const auth = { authorization: `Bearer ${token}` };
let upstream: FakeOpenAi;
let url: string;
let close: () => Promise<void>;
let dir: string;

beforeAll(async () => {
  upstream = await startFakeOpenAi({ quiet: true });
  dir = mkdtempSync(join(tmpdir(), 'gateway-http-'));
  const { app } = await createGateway({
    gatewayToken: token,
    agentId: 'http1',
    model: { baseUrl: upstream.baseUrl, defaultModel: 'm', timeoutMs: 500 },
    logger: createFileLogger({ file: join(dir, 'runtime.log'), level: 'info', base: { agentId: 'http1' } }),
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  close = () => app.close();
});
afterAll(async () => {
  await close?.();
  await upstream?.close();
  rmSync(dir, { recursive: true, force: true });
});

const chat = (body: string, headers: Record<string, string> = { ...auth, 'content-type': 'application/json' }) =>
  fetch(`${url}/v1/chat/completions`, { method: 'POST', headers, body });

describe('requests', () => {
  it('answers 401 before reading a body, and 400 in OpenAI shape for a body that is not JSON', async () => {
    expect((await chat('{not json', { 'content-type': 'application/json' })).status).toBe(401);
    const bad = await chat('{not json');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
  });

  it('refuses a body over the limit with 413 and a prototype key with 400; the provider sees neither', async () => {
    const before = upstream.requests.length;
    const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(BODY_LIMIT_BYTES) }] });
    expect((await chat(big)).status).toBe(413);
    expect((await chat('{"messages":[{"role":"user","content":"hi"}],"__proto__":{"admin":true}}')).status).toBe(400);
    expect((await chat('{"messages":[{"role":"user","content":"hi"}],"\\u005f_proto__":{"admin":true}}')).status).toBe(400);
    expect(upstream.requests.length).toBe(before);
  });

  it('answers HEAD on GET routes, 404 in Fastify’s shape for an unknown path, and 404 for /ws without an upgrade', async () => {
    const head = await fetch(`${url}/healthz`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    const missing = await fetch(`${url}/nope`, { headers: auth });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ message: 'Route GET:/nope not found', error: 'Not Found', statusCode: 404 });
    expect((await fetch(`${url}/nope`)).status).toBe(401); // auth first, as before
    expect((await fetch(`${url}/ws`, { headers: auth })).status).toBe(404);
  });

  it('passes a streamed completion through as server-sent events', async () => {
    const res = await chat(JSON.stringify({ stream: true, messages: [{ role: 'user', content: 'stream me' }] }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const text = await res.text();
    expect(text).toContain('data: [DONE]');
    const content = text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)).choices?.[0]?.delta?.content ?? '')
      .join('');
    expect(content).toBe('Echo: stream me');
  });

  it('a caller that leaves a stream ends the call to the provider', async () => {
    upstream.holdStreams = true;
    try {
      const aborted = upstream.waitForAbort(5_000);
      const controller = new AbortController();
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ stream: true, messages: [{ role: 'user', content: 'hold' }] }),
        signal: controller.signal,
      });
      const reader = res.body!.getReader();
      await reader.read(); // the first delta arrived
      controller.abort();
      await aborted;
    } finally {
      upstream.holdStreams = false;
    }
  });

  it('a provider slower than the timeout answers 504, one that cannot be reached 502', async () => {
    upstream.delayMs = 1_500;
    try {
      const slow = await chat(JSON.stringify({ messages: [{ role: 'user', content: 'slow' }] }));
      expect(slow.status).toBe(504);
    } finally {
      upstream.delayMs = 0;
    }
    const { app } = await createGateway({
      gatewayToken: token,
      agentId: 'http2',
      model: { baseUrl: 'http://127.0.0.1:9/v1', defaultModel: 'm', timeoutMs: 2_000 },
      logger: createFileLogger({ file: join(dir, 'other.log'), level: 'error', base: {} }),
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const port = (app.server.address() as AddressInfo).port;
      const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(res.status).toBe(502);
    } finally {
      await app.close();
    }
  });

  it('writes JSON lines in pino’s shape (level number, time, fields, msg) that the local driver reads', async () => {
    expect((await chat(JSON.stringify({ messages: [{ role: 'user', content: 'logged' }] }))).status).toBe(200);
    const lines = readFileSync(join(dir, 'runtime.log'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const answered = lines.find((l) => l.msg === 'chat completion answered');
    expect(answered).toMatchObject({ level: 30, agentId: 'http1', source: 'chat', model: 'm' });
    expect(typeof answered.time).toBe('number');
    expect(lines.some((l) => l.level === 50 && l.source === 'model')).toBe(true); // the timeout
    // one line per request, not for the probes
    expect(lines.some((l) => l.source === 'gateway' && l.msg === 'POST /v1/chat/completions 200')).toBe(true);
    expect(lines.some((l) => String(l.msg).includes('/healthz'))).toBe(false);
    expect(JSON.stringify(lines)).not.toContain(token);
  });
});

describe('WebSocket upgrades', () => {
  const open = (path: string, headers: Record<string, string> = {}) =>
    new Promise<{ ws?: WebSocket; status?: number }>((resolve) => {
      const ws = new WebSocket(`${url.replace('http', 'ws')}${path}`, { headers });
      ws.once('open', () => resolve({ ws }));
      ws.once('unexpected-response', (_req, res) => resolve({ status: res.statusCode! }));
      ws.once('error', () => resolve({}));
    });

  it('refuses a wrong token with 401 and another path with 404; takes the token in the header or ?token=', async () => {
    expect((await open('/ws', { authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await open('/elsewhere', auth)).status).toBe(404);
    for (const opened of [await open('/ws', auth), await open(`/ws?token=${token}`)]) {
      const ws = opened.ws!;
      const reply = new Promise<{ type: string; content?: string }>((r) => ws.once('message', (d) => r(JSON.parse(String(d)))));
      ws.send(JSON.stringify({ type: 'chat', content: 'over ws' }));
      expect(await reply).toEqual({ type: 'reply', content: 'Echo: over ws' });
      ws.close();
    }
  });
});

describe('closing', () => {
  it('closes open chat sockets, answers the request in flight, and 503 to one that comes after on its connection', async () => {
    const { app } = await createGateway({
      gatewayToken: token,
      agentId: 'http3',
      model: { baseUrl: upstream.baseUrl, defaultModel: 'm', timeoutMs: 2_000 },
      logger: createFileLogger({ file: join(dir, 'closing.log'), level: 'error', base: {} }),
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as AddressInfo).port;
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: auth });
    await new Promise((r) => ws.once('open', r));
    const wsClosed = new Promise((r) => ws.once('close', r));
    // a chat whose headers are in and its body not yet when the gateway starts closing, and a
    // second request pipelined behind it on the same connection
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'last words' }] });
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (d) => (answer += String(d)));
    const ended = new Promise((r) => socket.once('close', r));
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    await new Promise((r) => setTimeout(r, 100));
    const closed = app.close();
    socket.write(`${body}GET /v1/stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
    await ended;
    await closed;
    await wsClosed;
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(answer).toContain('Echo: last words');
    expect(answer).toMatch(/HTTP\/1\.1 503 Service Unavailable[\s\S]*"error":"Service Unavailable"/);
  });
});
