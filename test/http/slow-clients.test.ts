/**
 * Slow clients (docs/security.md "Slow clients"): connections that drip their headers or body
 * are closed after HTTP_HEADERS_TIMEOUT_MS / HTTP_REQUEST_TIMEOUT_MS, idle keep-alive ones after
 * HTTP_KEEP_ALIVE_TIMEOUT_MS, on both apps. Responses are not limited: a Server-Sent Events
 * stream and a WebSocket outlive every timeout. Real sockets; the timeouts are set small.
 */

import { type AddressInfo, connect, type Socket } from 'node:net';
import fastifyWebsocket from '@fastify/websocket';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type App, createBaseApp } from '../../src/http/shared/base-app.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const TIMEOUTS = { HTTP_REQUEST_TIMEOUT_MS: '800', HTTP_HEADERS_TIMEOUT_MS: '400', HTTP_KEEP_ALIVE_TIMEOUT_MS: '300' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let t: TestPlatform;
let webPort: number;
let backendPort: number;
beforeAll(async () => {
  t = await startTestPlatform(TIMEOUTS);
  await t.web.listen({ host: '127.0.0.1', port: 0 });
  await t.backend.listen({ host: '127.0.0.1', port: 0 });
  webPort = (t.web.server.address() as AddressInfo).port;
  backendPort = (t.backend.server.address() as AddressInfo).port;
});
afterAll(() => t?.close());

type Held = { socket: Socket; closedAt: number | undefined; data: string };
function hold(port: number, first: string, drip: string | undefined, everyMs = 50): Held {
  const h: Held = { socket: connect(port, '127.0.0.1'), closedAt: undefined, data: '' };
  h.socket.on('data', (d) => (h.data += d.toString()));
  h.socket.on('error', () => {});
  h.socket.on('close', () => (h.closedAt = Date.now()));
  h.socket.write(first);
  if (drip !== undefined) {
    const timer = setInterval(() => {
      if (h.closedAt !== undefined || h.socket.destroyed) return clearInterval(timer);
      h.socket.write(drip);
    }, everyMs);
  }
  return h;
}
async function allClosed(held: Held[], deadlineMs: number) {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until && held.some((h) => h.closedAt === undefined)) await sleep(50);
  for (const h of held) h.socket.destroy();
  return held.filter((h) => h.closedAt !== undefined).length;
}

describe('slow clients are cut off on both apps', () => {
  it('50 connections dripping a body one byte at a time are all closed (408) within the request timeout', async () => {
    const started = Date.now();
    const held = Array.from({ length: 50 }, (_, i) =>
      hold(
        i % 2 ? webPort : backendPort,
        `POST ${i % 2 ? '/api/auth/login' : '/api/agents'} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-internal-key\r\n` +
          'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{',
        ' ',
      ),
    );
    expect(await allClosed(held, 5_000)).toBe(50);
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(held.filter((h) => h.data.startsWith('HTTP/1.1 408')).length).toBe(50);
  });

  it('connections dripping their headers are closed within the headers timeout', async () => {
    const held = Array.from({ length: 20 }, (_, i) => hold(i % 2 ? webPort : backendPort, 'GET /api/health HTTP/1.1\r\nHost: x\r\n', 'X'));
    expect(await allClosed(held, 3_000)).toBe(20);
  });

  it('an idle keep-alive connection is closed after the keep-alive timeout', async () => {
    const h = hold(webPort, 'GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n', undefined);
    expect(await allClosed([h], 3_000)).toBe(1);
    expect(h.data).toMatch(/^HTTP\/1\.1 200/);
  });

  it('a client that sends its request in time is answered normally', async () => {
    const res = await fetch(`http://127.0.0.1:${webPort}/api/health`);
    expect(res.status).toBe(200);
  });
});

describe('responses are not limited: Server-Sent Events and WebSockets outlive the timeouts', () => {
  let app: App;
  let port: number;
  beforeAll(async () => {
    app = await createBaseApp({
      title: 't',
      description: 't',
      version: '0',
      logLevel: 'silent',
      bodyLimit: 1_000_000,
      trustProxy: false,
      timeouts: { requestMs: 300, headersMs: 200, keepAliveMs: 200 },
    });
    await app.register(fastifyWebsocket);
    app.get('/sse', (_request, reply) => {
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream' });
      let n = 0;
      const timer = setInterval(() => {
        reply.raw.write(`data: ${n++}\n\n`);
        if (n === 8) {
          clearInterval(timer);
          reply.raw.end();
        }
      }, 200); // 1.6 s in all, far beyond every timeout
    });
    app.get('/ws', { websocket: true }, (socket) => {
      socket.on('message', (m) => socket.send(`echo ${m.toString()}`));
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as AddressInfo).port;
  });
  afterAll(() => app?.close());

  it('an SSE stream of 1.6 s with gaps of 200 ms arrives whole', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/sse`);
    const text = await res.text();
    expect(text.match(/^data: /gm)).toHaveLength(8);
  });

  it('a WebSocket idle for 1.2 s still answers', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    await sleep(1_200);
    const reply = new Promise<string>((resolve) => ws.once('message', (m) => resolve(m.toString())));
    ws.send('still here');
    expect(await reply).toBe('echo still here');
    ws.close();
  });
});
