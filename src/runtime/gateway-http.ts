/**
 * The gateway's HTTP layer on `node:http` with a route table, no framework: an agent is one
 * process per agent, idle most of its life, so every module it loads is memory it holds for good
 * (Fastify, its plugins and pino were ~35 MB of an idle agent's ~100 MB; docs/benchmarks.md
 * "Memory of one built-in-runtime agent"). What it keeps of what Fastify did for the gateway:
 * the client address (the connection's, or the one trusted proxy's last X-Forwarded-For entry), a
 * guard run before any body is read (so auth answers 401 before 400), JSON bodies up to 4 MB
 * (prototype keys refused), HEAD on every GET route, 404 in Fastify's shape, 503 while closing,
 * and the slow-client timeouts on the server. WebSocket upgrades pass the same guard, then go to
 * the one upgrade path (ws-chat.ts).
 */
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { GatewayLimits } from '../config/limits.ts';
import { openAiError } from './openai-errors.ts';

// Through getBuiltinModule, not `import`: an ES import of node:http builds its whole namespace,
// and reading its lazy exports (WebSocket, MessageEvent…) loads Node's bundled undici: +13 MB resident
const http = process.getBuiltinModule('node:http');

/** Largest request body (bytes), as the Fastify gateway had it. */
export const BODY_LIMIT_BYTES = 4 * 1024 * 1024;

/** What a guard and a handler see of a request. */
export type GatewayRequest = {
  raw: IncomingMessage;
  method: string;
  /** the URL without its query string */
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  /** the client's address (see clientIp) */
  ip: string;
  /** the parsed body of a POST: JSON, text for text/plain, undefined when empty */
  body?: unknown;
};

/** An answer given instead of routing (the guard's refusals, unknown paths). */
export type Rejection = { status: number; body: unknown; headers?: Record<string, string | number> };

export type RouteHandler = (req: GatewayRequest, res: ServerResponse) => Promise<void> | void;

export type GatewayServerOptions = {
  limits: GatewayLimits;
  trustedProxy?: string | undefined;
  /** runs before routing and before a body is read, for requests and upgrades alike */
  guard: (req: GatewayRequest) => Rejection | undefined;
  /** keyed `METHOD /path`; a GET route answers HEAD too */
  routes: Record<string, RouteHandler>;
  /** the path that accepts WebSocket upgrades, and what takes the socket once the guard let it through */
  upgrade: { path: string; handle: (req: IncomingMessage, socket: Duplex, head: Buffer) => void };
  /** each answered request (or refused upgrade), with the time it took */
  onResponse?: (req: GatewayRequest, status: number, ms: number) => void;
  onConnection?: (socket: Socket) => void;
  /** when the gateway starts closing (open WebSockets), and once it has closed (counters) */
  onClosing?: () => void;
  onClosed?: () => void;
  onError?: (err: Error, req: GatewayRequest) => void;
};

export type GatewayApp = {
  server: Server;
  /** on `port` (and `host`), or on the listening socket the platform handed over as descriptor `fd` */
  listen(options: { port: number; host?: string } | { fd: number }): Promise<void>;
  close(): Promise<void>;
};

/** Writes `body` as JSON. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string | number> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The connection's address; behind the platform's own proxy (and only when the connection is
 * from it) the entry that proxy appended to X-Forwarded-For, never one the client wrote itself.
 */
function clientIp(raw: IncomingMessage, trustedProxy: string | undefined, overUnixSocket: boolean): string {
  // the Unix socket the local driver hands over (AGENT_LISTEN_FD) is reached only through the
  // platform's own forwarder on the host's loopback: its connections have no address of their own
  const peer = overUnixSocket ? '127.0.0.1' : (raw.socket.remoteAddress ?? '');
  if (!trustedProxy || peer !== trustedProxy) return peer;
  const forwarded = raw.headers['x-forwarded-for'];
  if (forwarded === undefined) return peer;
  return String(forwarded).split(',').at(-1)!.trim();
}

const notFound = (method: string, path: string): Rejection => ({
  status: 404,
  body: { message: `Route ${method}:${path} not found`, error: 'Not Found', statusCode: 404 },
});
const unavailable: Rejection = { status: 503, body: { error: 'Service Unavailable' }, headers: { connection: 'close' } };

// a key that would reach an object's prototype when the body is merged or copied (Fastify refused them too)
// (a cheap scan first: the reviver runs only on a body that could hold one, plainly or \u-escaped)
const mayHoldProtoKey = (text: string) => text.includes('proto') || text.includes('\\u');
const refuseProtoKeys = (key: string, value: unknown) => {
  if (key === '__proto__' || (key === 'constructor' && value !== null && typeof value === 'object' && Object.hasOwn(value, 'prototype')))
    throw new SyntaxError('prototype key in the body');
  return value;
};

/** The request body, parsed by its content type, or the rejection to answer with. */
function readBody(raw: IncomingMessage): Promise<{ body: unknown } | Rejection> {
  const declared = Number(raw.headers['content-length'] ?? Number.NaN);
  const tooLarge: Rejection = {
    status: 413,
    body: openAiError('Request body is too large', 'invalid_request_error'),
    headers: { connection: 'close' },
  };
  if (declared > BODY_LIMIT_BYTES) return Promise.resolve(tooLarge);
  if (declared === 0 || (Number.isNaN(declared) && raw.headers['transfer-encoding'] === undefined))
    return Promise.resolve({ body: undefined });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    raw.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > BODY_LIMIT_BYTES) {
        raw.pause();
        raw.removeAllListeners('data');
        resolve(tooLarge);
      } else chunks.push(chunk);
    });
    raw.on('error', () => resolve({ status: 400, body: openAiError('The request body could not be read', 'invalid_request_error') }));
    raw.on('end', () => {
      if (size > BODY_LIMIT_BYTES) return;
      const text = Buffer.concat(chunks).toString('utf8');
      const type = (raw.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (type === 'application/json' || type.endsWith('+json')) {
        if (text.trim() === '') return resolve({ status: 400, body: openAiError('The JSON body is empty', 'invalid_request_error') });
        try {
          return resolve({ body: mayHoldProtoKey(text) ? JSON.parse(text, refuseProtoKeys) : JSON.parse(text) });
        } catch {
          return resolve({ status: 400, body: openAiError('The body is not valid JSON', 'invalid_request_error') });
        }
      }
      if (type === 'text/plain') return resolve({ body: text });
      if (size === 0) return resolve({ body: undefined });
      resolve({ status: 415, body: openAiError(`Unsupported content type: ${type || 'none'}`, 'invalid_request_error') });
    });
  });
}

/** The raw HTTP answer to an upgrade that is refused (the socket is not a ServerResponse yet). */
function refuseUpgrade(socket: Duplex, r: Rejection): void {
  const text = JSON.stringify(r.body);
  const lines = [
    `HTTP/1.1 ${r.status} ${http.STATUS_CODES[r.status] ?? ''}`,
    'connection: close',
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(text)}`,
    ...Object.entries(r.headers ?? {})
      .filter(([k]) => k !== 'connection')
      .map(([k, v]) => `${k}: ${v}`),
  ];
  socket.end(`${lines.join('\r\n')}\r\n\r\n${text}`);
}

export function createGatewayServer(o: GatewayServerOptions): GatewayApp {
  const { limits } = o;
  const server = http.createServer({
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // how often Node checks the two timeouts above (its default, 30 s, would let a slow client stay that long)
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 2))),
  });
  let closing = false;
  let closed: Promise<void> | undefined;
  /** listening on a Unix socket (handed over by the local driver) rather than a TCP port */
  let overUnixSocket = false;

  const describe = (raw: IncomingMessage): GatewayRequest => {
    const url = raw.url ?? '/';
    const q = url.indexOf('?');
    return {
      raw,
      method: raw.method ?? 'GET',
      path: q < 0 ? url : url.slice(0, q),
      query: new URLSearchParams(q < 0 ? '' : url.slice(q + 1)),
      headers: raw.headers,
      ip: clientIp(raw, o.trustedProxy, overUnixSocket),
    };
  };

  const answer = (res: ServerResponse, r: Rejection) => {
    sendJson(res, r.status, r.body, r.headers);
    // a refused body is not read: end the connection rather than parse what follows it as a request
    if (r.status === 413) res.once('finish', () => res.req.destroy());
  };

  server.on('request', (raw: IncomingMessage, res: ServerResponse) => {
    const started = Date.now();
    const req = describe(raw);
    res.once('finish', () => o.onResponse?.(req, res.statusCode, Date.now() - started));
    void (async () => {
      if (closing) return answer(res, unavailable);
      const refused = o.guard(req);
      if (refused) return answer(res, refused);
      const handler = o.routes[`${req.method === 'HEAD' ? 'GET' : req.method} ${req.path}`];
      if (!handler) return answer(res, notFound(req.method, req.path));
      if (req.method === 'POST') {
        const read = await readBody(raw);
        if ('status' in read) return answer(res, read);
        req.body = read.body;
      }
      await handler(req, res);
    })().catch((err: Error) => {
      o.onError?.(err, req);
      if (!res.headersSent) sendJson(res, 500, { error: 'Internal Server Error' });
      else res.destroy();
    });
  });

  server.on('upgrade', (raw: IncomingMessage, socket: Duplex, head: Buffer) => {
    const started = Date.now();
    // a reset by the client must not be an uncaught error, before the WebSocket library owns the socket
    // (it is loaded on the first upgrade) or after (it destroys the socket on errors as well)
    socket.on('error', () => socket.destroy());
    const req = describe(raw);
    const refused = closing
      ? unavailable
      : (o.guard(req) ?? (req.method === 'GET' && req.path === o.upgrade.path ? undefined : notFound(req.method, req.path)));
    if (refused) {
      refuseUpgrade(socket, refused);
      o.onResponse?.(req, refused.status, Date.now() - started);
      return;
    }
    o.upgrade.handle(raw, socket, head);
  });

  if (o.onConnection) server.on('connection', o.onConnection);

  return {
    server,
    listen: (at) =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        const listening = () => {
          server.off('error', reject);
          // a TCP listener has an address object; a Unix one its path, or none when it was handed over as a descriptor
          const at = server.address();
          overUnixSocket = at === null || typeof at === 'string';
          resolve();
        };
        if ('fd' in at) server.listen({ fd: at.fd }, listening);
        else server.listen(at.port, at.host, listening);
      }),
    close() {
      closed ??= new Promise<void>((resolve) => {
        closing = true;
        o.onClosing?.();
        const done = () => {
          o.onClosed?.();
          resolve();
        };
        if (!server.listening) return done();
        server.close(done);
        server.closeIdleConnections();
      });
      return closed;
    },
  };
}
