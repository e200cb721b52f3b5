/**
 * The agent gateway against hostile clients (docs/agents.md "Agent gateway limits"): the §8 lockout
 * keyed by the connection (X-Forwarded-For is not the client's to choose), WebSocket and HTTP chat
 * floods bounded by message size, messages per second, a per-socket queue and an agent-wide model
 * call limit, and slow clients cut off by header, request and keep-alive timeouts. Real sockets.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import pino from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createGateway, type GatewayLimits } from '../../src/runtime/gateway.ts';

const token = 'g'.repeat(48);
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (closers.length) await closers.pop()!().catch(() => {});
});

/** An OpenAI-compatible upstream that answers after `delayMs` and records the most calls it had in flight at once. */
async function slowUpstream(delayMs: number) {
  const state = { inFlight: 0, maxInFlight: 0, calls: 0, baseUrl: '' };
  const server: Server = createServer((req, res) => {
    state.calls++;
    state.inFlight++;
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
    req.resume();
    req.on('end', () =>
      setTimeout(() => {
        state.inFlight--;
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'ok' } }] }));
      }, delayMs),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  closers.push(() => new Promise((r) => server.close(r)));
  return state;
}

async function gateway(opts: { baseUrl?: string; limits?: Partial<GatewayLimits>; trustedProxy?: string; loopbackExempt?: boolean } = {}) {
  const { app } = await createGateway({
    gatewayToken: token,
    agentId: 'limits',
    model: { baseUrl: opts.baseUrl ?? 'http://127.0.0.1:9/v1', defaultModel: 'm', timeoutMs: 5_000 },
    logger: pino({ level: 'silent' }),
    loopbackExempt: opts.loopbackExempt ?? true,
    ...(opts.trustedProxy ? { trustedProxy: opts.trustedProxy } : {}),
    ...(opts.limits ? { limits: opts.limits } : {}),
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  closers.push(() => app.close());
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** GET /v1/stats from a chosen loopback source address (the whole 127/8 is the loopback interface). */
function statsFrom(url: string, source: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}/v1/stats`, { localAddress: source, headers, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', reject);
    req.end();
  });
}
const wrong = { authorization: 'Bearer wrong' };
const right = { authorization: `Bearer ${token}` };

describe('gateway lockout: the client address comes from the connection', () => {
  it('rotating X-Forwarded-For values does not escape the lockout', async () => {
    const url = await gateway({ loopbackExempt: false });
    for (let i = 0; i < 10; i++) expect(await statsFrom(url, '127.0.0.1', { ...wrong, 'x-forwarded-for': `198.51.100.${i}` })).toBe(401);
    expect(await statsFrom(url, '127.0.0.1', { ...right, 'x-forwarded-for': '198.51.100.200' })).toBe(429);
  });

  it("naming a victim's address in X-Forwarded-For locks out the sender, not the victim", async () => {
    const url = await gateway({ loopbackExempt: false });
    for (let i = 0; i < 10; i++) await statsFrom(url, '127.0.0.1', { ...wrong, 'x-forwarded-for': '127.0.0.3' });
    expect(await statsFrom(url, '127.0.0.3', right)).toBe(200);
    expect(await statsFrom(url, '127.0.0.1', right)).toBe(429);
  });

  it("behind the platform's own proxy only the entry it appended counts: writing 127.0.0.1 first does not exempt a client", async () => {
    // the platform's proxy at 127.0.0.1 appends the address it saw; what the client wrote before it is ignored
    const url = await gateway({ trustedProxy: '127.0.0.1' });
    for (let i = 0; i < 10; i++) await statsFrom(url, '127.0.0.1', { ...wrong, 'x-forwarded-for': `127.0.0.1, 203.0.113.9` });
    expect(await statsFrom(url, '127.0.0.1', { ...right, 'x-forwarded-for': '127.0.0.1, 203.0.113.9' })).toBe(429);
    expect(await statsFrom(url, '127.0.0.1', { ...right, 'x-forwarded-for': '203.0.113.10' })).toBe(200);
    // a client that is not the trusted proxy is its connection address, whatever it sends
    for (let i = 0; i < 12; i++) expect(await statsFrom(url, '127.0.0.5', { ...wrong, 'x-forwarded-for': `203.0.113.${i}` })).toBe(401); // loopback: exempt
  });
});

function openWs(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace('http', 'ws')}/ws`, { headers: right });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

describe('WebSocket and HTTP floods', () => {
  it('500 messages at once: bounded by the per-socket rate and queue, the model never sees more than its limit in flight', async () => {
    const up = await slowUpstream(30);
    const url = await gateway({
      baseUrl: up.baseUrl,
      limits: { maxConcurrentModelCalls: 2, wsBurst: 10, wsMessagesPerSecond: 5, wsQueuePerSocket: 3 },
    });
    const sockets = await Promise.all([openWs(url), openWs(url), openWs(url)]);
    const frames: { type: string; code?: string }[] = [];
    for (const ws of sockets) ws.on('message', (d) => frames.push(JSON.parse(String(d))));
    for (let i = 0; i < 500; i++) sockets[i % 3]!.send(JSON.stringify({ type: 'chat', content: `hello ${i}` }));
    // every message is answered: a reply, or an error frame saying why not
    const deadline = Date.now() + 10_000;
    while (frames.length < 500 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(frames).toHaveLength(500);
    const replies = frames.filter((f) => f.type === 'reply').length;
    const codes = new Set(frames.filter((f) => f.type === 'error').map((f) => f.code));
    expect(codes).toEqual(new Set(['RATE_LIMITED', 'QUEUE_FULL']));
    // per socket: one running plus three queued from the burst of ten
    expect(replies).toBeLessThanOrEqual(3 * 4);
    expect(up.calls).toBe(replies);
    expect(up.maxInFlight).toBeLessThanOrEqual(2);
    for (const ws of sockets) ws.close();
  });

  it('a message over the size limit closes the socket (1009) before it is parsed', async () => {
    const up = await slowUpstream(1);
    const url = await gateway({ baseUrl: up.baseUrl, limits: { wsMaxMessageBytes: 64 * 1024 } });
    const ws = await openWs(url);
    const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
    ws.send(JSON.stringify({ type: 'chat', content: 'x'.repeat(200 * 1024) }));
    expect(await closed).toBe(1009);
    expect(up.calls).toBe(0);
  });

  it('concurrent HTTP chat: at most the limit reaches the model, the queue waits, the rest get 429 AGENT_BUSY', async () => {
    const up = await slowUpstream(50);
    const url = await gateway({ baseUrl: up.baseUrl, limits: { maxConcurrentModelCalls: 2, modelQueue: 3 } });
    const res = await Promise.all(
      Array.from({ length: 20 }, () =>
        fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { ...right, 'content-type': 'application/json' },
          body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
        }),
      ),
    );
    const statuses = res.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(5);
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    const busy = res.find((r) => r.status === 429);
    expect(busy).toBeDefined();
    expect(((await busy!.json()) as { error: { code: string } }).error.code).toBe('AGENT_BUSY');
    expect(up.maxInFlight).toBeLessThanOrEqual(2);
  });
});

describe('slow clients (header, request and keep-alive timeouts)', () => {
  /** Resolves true when the server closes the socket before `withinMs`. */
  const closedWithin = (socket: Socket, withinMs: number) =>
    new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), withinMs);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });

  it('connections dripping headers or a body one byte at a time, or idling after a request, are closed', async () => {
    const url = await gateway({ limits: { headersTimeoutMs: 300, requestTimeoutMs: 600, keepAliveTimeoutMs: 300 } });
    const port = Number(new URL(url).port);
    const sockets: Socket[] = [];
    const drips: NodeJS.Timeout[] = [];
    const open = () => {
      const s = connect(port, '127.0.0.1');
      s.on('error', () => {});
      s.resume(); // read what the server sends (its 408, its FIN), or 'close' never comes
      sockets.push(s);
      return s;
    };
    // 20 clients sending their headers one byte every 50 ms, forever
    const headerDrip = Array.from({ length: 20 }, () => {
      const s = open();
      const text = `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: ${'a'.repeat(10_000)}`;
      let i = 0;
      drips.push(setInterval(() => s.writable && s.write(text[i++ % text.length]!), 50));
      return s;
    });
    // 10 clients with complete headers and a body that never finishes
    const bodyDrip = Array.from({ length: 10 }, () => {
      const s = open();
      s.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`,
      );
      drips.push(setInterval(() => s.writable && s.write(' '), 50));
      return s;
    });
    // a keep-alive client that sends one request and then nothing
    const idle = open();
    let answered = '';
    idle.on('data', (d) => (answered += String(d)));
    idle.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    try {
      const [h, b, i] = await Promise.all([
        Promise.all(headerDrip.map((s) => closedWithin(s, 8_000))),
        Promise.all(bodyDrip.map((s) => closedWithin(s, 8_000))),
        closedWithin(idle, 8_000),
      ]);
      expect({ headers: h.every(Boolean), body: b.every(Boolean), idle: i }).toEqual({ headers: true, body: true, idle: true });
      expect(answered).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      for (const d of drips) clearInterval(d);
      for (const s of sockets) s.destroy();
    }
  });
});

afterAll(async () => {
  while (closers.length) await closers.pop()!().catch(() => {});
});
