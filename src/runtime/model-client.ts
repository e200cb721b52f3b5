/**
 * The runtime's outgoing calls (its model provider, and chat turns back to the platform) as JSON
 * POSTs over node:http or node:https, not fetch: fetch is Node's bundled undici, which brings
 * http2, tls, zlib, worker_threads and more with it, ~12 MB an agent would keep for the rest of its
 * life after its first chat (docs/benchmarks.md "Memory of one built-in-runtime agent"). Node's
 * global agents keep connections alive, as fetch did.
 */
import type { IncomingMessage } from 'node:http';

/** AGENT_LOOPBACK_SOCKETS: the folder of `<port>.sock` through which the platform's loopback ports are reached. */
let loopbackSockets: string | undefined;

/**
 * In the local driver's sandbox the agent's network holds nothing but its own loopback: a call to a
 * loopback URL goes through the Unix socket the platform forwards to that port instead
 * (src/domains/agents/drivers/local/containment/agent-loopback.service.ts).
 */
export function routeLoopbackThrough(dir: string | undefined): void {
  loopbackSockets = dir;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Kept-alive agents that open at most `maxSockets` connections per origin (more calls wait in the
 * agent's queue): for calls nobody waits on, so a burst of them cannot open connections without end.
 */
const bounded = new Map<string, import('node:http').Agent>();
function boundedAgent(client: typeof import('node:http') | typeof import('node:https'), protocol: string, maxSockets: number) {
  const key = `${protocol}${maxSockets}`;
  let agent = bounded.get(key);
  if (!agent) bounded.set(key, (agent = new client.Agent({ keepAlive: true, maxSockets })));
  return agent;
}

/**
 * The API key id the platform named on a request (KEY_ID_HEADER), when it is one plausible id: the
 * runtime passes it on to its model call for that request (docs/payments.md "API keys").
 */
export const namedKey = (value: string | string[] | undefined): string | undefined =>
  typeof value === 'string' && /^[A-Za-z0-9-]{1,64}$/.test(value) ? value : undefined;

/** What the gateway reads of an answer (the subset of fetch's Response it used). */
export type UpstreamResponse = {
  status: number;
  ok: boolean;
  header(name: string): string | undefined;
  /** the body as it arrives (a streamed completion is piped on as it is) */
  body: IncomingMessage;
  text(): Promise<string>;
  json(): Promise<unknown>;
  /** reads and drops the body, so the connection can serve the next call */
  discard(): void;
};

/**
 * POSTs `body` as JSON to `url`. Rejects when the provider cannot be reached, and with the
 * signal's reason (a TimeoutError for AbortSignal.timeout) when the signal ends the call, also
 * while the body is still being read.
 */
export function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string>,
  signal: AbortSignal,
  options: { maxSockets?: number } = {},
): Promise<UpstreamResponse> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? process.getBuiltinModule('node:https') : process.getBuiltinModule('node:http');
  const agent = options.maxSockets ? boundedAgent(client, target.protocol, options.maxSockets) : undefined;
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const fail = (err: Error) => reject(signal.aborted ? signal.reason : err);
    const req = client.request(
      target,
      {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        signal,
        ...(agent ? { agent } : {}),
        ...(loopbackSockets && LOOPBACK.has(target.hostname)
          ? { socketPath: `${loopbackSockets}/${target.port || (target.protocol === 'https:' ? 443 : 80)}.sock` }
          : {}),
      },
      (res) => {
        let read: Promise<string> | undefined;
        const text = () =>
          (read ??= new Promise<string>((done, failed) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.once('end', () => done(Buffer.concat(chunks).toString('utf8')));
            res.once('error', (err) => failed(signal.aborted ? signal.reason : err));
            res.once('close', () => {
              if (!res.complete) failed(signal.aborted ? signal.reason : new Error('the answer was cut off'));
            });
          }));
        // an answer cut off (the signal, the provider gone) errors the stream: never an uncaught error
        res.on('error', () => {});
        const status = res.statusCode ?? 0;
        resolve({
          status,
          ok: status >= 200 && status < 300,
          header: (name) => {
            const v = res.headers[name.toLowerCase()];
            return Array.isArray(v) ? v.join(', ') : v;
          },
          body: res,
          text,
          json: async () => JSON.parse(await text()),
          discard: () => void res.resume(),
        });
      },
    );
    req.once('error', fail);
    req.end(payload);
  });
}
