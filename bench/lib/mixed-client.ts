/**
 * Child-process entry of the mixed load (mixed.ts): closed-loop workers per route, each sending
 * one request after the other for `durationS`, so the load generator never shares the platform's
 * event loop. Every second it prints one JSON line per second of results (count, statuses,
 * latencies of each route); a request that gets no answer within `timeoutMs` counts as TIMEOUT, so
 * a hang shows as one, never as a missing line.
 *
 * Routes of kind `config` are acknowledged writes: each worker is one user saving
 * `{ bench: { worker, seq } }` with increasing `seq`, and the last line lists per worker the last
 * seq answered 2xx and the seqs sent after it that got no 2xx (which may or may not have been
 * stored). Stops early when stdin closes.
 *
 * argv[2]: JSON MixedClientOptions.
 */
import { Agent, request } from 'undici';

export type MixedRoute = {
  name: string;
  method: string;
  url: string;
  headers?: Record<string, string>;
  body?: string;
  /** workers of this route; worker i uses cookies[i % cookies.length] when cookies are given */
  concurrency: number;
  cookies?: string[];
  kind?: 'config';
};
export type MixedClientOptions = { routes: MixedRoute[]; durationS: number; timeoutMs: number };
export type RouteTick = { n: number; status: Record<string, number>; lat: number[]; maxMs: number };
export type Tick = { type: 'tick'; t: number; routes: Record<string, RouteTick> };
export type ConfigAcks = { worker: number; cookie: string; lastAcked: number; unackedAfter: number[] };
export type Done = { type: 'done'; acks: Record<string, ConfigAcks[]> };

const opts = JSON.parse(process.argv[2] ?? '{}') as MixedClientOptions;
const dispatcher = new Agent({ connections: 256, headersTimeout: opts.timeoutMs, bodyTimeout: opts.timeoutMs, keepAliveTimeout: 10_000 });
const end = Date.now() + opts.durationS * 1000;
let stop = false;
process.stdin.on('end', () => (stop = true));
process.stdin.resume();

let current: Record<string, RouteTick> = {};
const record = (route: string, status: string, ms: number) => {
  const r = (current[route] ??= { n: 0, status: {}, lat: [], maxMs: 0 });
  r.n++;
  r.status[status] = (r.status[status] ?? 0) + 1;
  r.lat.push(Math.round(ms * 10) / 10);
  if (ms > r.maxMs) r.maxMs = Math.round(ms);
};
const flush = () => {
  const tick: Tick = { type: 'tick', t: Date.now(), routes: current };
  current = {};
  process.stdout.write(`${JSON.stringify(tick)}\n`);
};
const ticker = setInterval(flush, 1000);

async function send(route: MixedRoute, headers: Record<string, string>, body: string | undefined): Promise<string> {
  const t0 = performance.now();
  let status: string;
  try {
    const res = await request(route.url, {
      dispatcher,
      method: route.method as 'GET',
      headers,
      ...(body !== undefined ? { body } : {}),
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    await res.body.text();
    status = String(res.statusCode);
  } catch (err) {
    const name = (err as Error).name;
    const code = (err as { code?: string }).code ?? '';
    status = name === 'TimeoutError' || code.includes('TIMEOUT') ? 'TIMEOUT' : 'ERR';
  }
  record(route.name, status, performance.now() - t0);
  return status;
}

const acks: Record<string, ConfigAcks[]> = {};

async function worker(route: MixedRoute, i: number) {
  const cookie = route.cookies?.length ? route.cookies[i % route.cookies.length] : undefined;
  const headers = { ...(route.headers ?? {}), ...(cookie ? { cookie } : {}) };
  const ack: ConfigAcks | undefined =
    route.kind === 'config' ? { worker: i, cookie: cookie ?? '', lastAcked: 0, unackedAfter: [] } : undefined;
  if (ack) (acks[route.name] ??= []).push(ack);
  let seq = 0;
  while (!stop && Date.now() < end) {
    if (ack) {
      seq++;
      const status = await send(route, headers, JSON.stringify({ config: { bench: { worker: i, seq } } }));
      if (status.startsWith('2')) {
        ack.lastAcked = seq;
        ack.unackedAfter = [];
      } else {
        ack.unackedAfter.push(seq);
        // a failing platform is not hammered in a tight loop (it answers fast by design)
        await new Promise((r) => setTimeout(r, 20));
      }
    } else {
      const status = await send(route, headers, route.body);
      if (!status.startsWith('2')) await new Promise((r) => setTimeout(r, 20));
    }
  }
}

await Promise.all(opts.routes.flatMap((r) => Array.from({ length: r.concurrency }, (_, i) => worker(r, i))));
clearInterval(ticker);
flush();
const done: Done = { type: 'done', acks };
process.stdout.write(`${JSON.stringify(done)}\n`);
await dispatcher.close();
process.exit(0);
