/**
 * AI proxy overhead: a local OpenAI-compatible upstream with a fixed delay, measured in
 * one run three ways at concurrency 1 and 64:
 *   direct   — the client calls the upstream itself;
 *   platform — POST /api/ai/chat through a real listening backend (bearer key, per-IP limit,
 *              plan middleware, zod validation, catalog lookup, keep-alive pool, usage logged to
 *              the embedded PostgreSQL);
 *   portkey  — the Portkey open-source gateway (@portkey-ai/gateway@1.15.2, installed into a temp
 *              folder for the bench only) in front of the same upstream.
 * Added latency = case percentile − direct percentile in the same round. The load client is a
 * child process (undici, hrtime per request: sub-millisecond resolution, which autocannon's
 * millisecond histogram lacks), so it never shares the servers' event loop.
 * Settings: BENCH_DURATION (s per measurement, default 5), BENCH_WARMUP (default 1),
 * BENCH_ROUNDS (default 3), BENCH_AI_DELAY_MS (upstream delay, default 10), PORTKEY_DIR.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import pino from 'pino';
import { Pool } from 'undici';
import { loadConfig } from '../src/config/env.ts';
import { resolveSecrets } from '../src/config/secrets.ts';
import { createDb, type Db } from '../src/db/client.ts';
import { freePort } from '../src/db/embedded.ts';
import { chatBody, chatResponse } from '../src/domains/ai/ai-chat.schemas.ts';
import { checkPlan } from '../src/domains/ai/plan.rules.ts';
import type { UsageStore } from '../src/domains/ai/usage-store.service.ts';
import type { App } from '../src/http/shared/base-app.ts';
import { loggerOptions } from '../src/http/shared/logging.ts';
import { secretMatcher } from '../src/lib/crypto.ts';
import { createMemoryRateLimiter, createRateLimiter } from '../src/lib/rate-limiter.ts';
import { createPlatform, type Platform } from '../src/platform.ts';
import { type BenchDatabase, startBenchDatabase, stopProcess } from './lib/bench-db.ts';
import { loadSettings } from './lib/load.ts';
import { describeMachine, machineLine } from './lib/machine.ts';
import { measureOutside, outsideMarkdown } from './lib/outside-proxy.ts';
import { type BenchOutput, round } from './lib/report.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PORTKEY_VERSION = '1.15.2';
/** The outside run at concurrency 64: rounds and seconds per case and round (bench/lib/outside-proxy.ts `rounds64`). */
const OUTSIDE_ROUNDS_64 = Number(process.env.BENCH_AI_OUTSIDE_ROUNDS_C64 ?? 9);
const OUTSIDE_DURATION_64 = Number(process.env.BENCH_AI_OUTSIDE_DURATION_C64 ?? 2);

export type ClientResult = { rps: number; p50Ms: number; p99Ms: number; meanMs: number; count: number; failures: number };
export type Target = { key: string; url: string; headers: Record<string, string>; body: string };

/** Load client, run as `node --input-type=module -e` in ROOT so it resolves undici. */
const CLIENT = `
import { Pool } from 'undici';
const o = JSON.parse(process.argv[1]);
const u = new URL(o.url);
const pool = new Pool(u.origin, { connections: o.concurrency, pipelining: 1 });
const path = u.pathname + u.search;
async function phase(seconds, record) {
  const lat = []; let failures = 0; const end = performance.now() + seconds * 1000;
  await Promise.all(Array.from({ length: o.concurrency }, async () => {
    while (performance.now() < end) {
      const t0 = performance.now();
      try {
        const r = await pool.request({ method: 'POST', path, headers: o.headers, body: o.body });
        await r.body.text();
        if (r.statusCode !== 200) failures++; else if (record) lat.push(performance.now() - t0);
      } catch { failures++; }
    }
  }));
  return { lat, failures };
}
if (o.warmupS > 0) await phase(o.warmupS, false);
const { lat, failures } = await phase(o.durationS, true);
lat.sort((a, b) => a - b);
const pct = (p) => lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : NaN;
process.stdout.write(JSON.stringify({ rps: lat.length / o.durationS, p50Ms: pct(0.5), p99Ms: pct(0.99),
  meanMs: lat.reduce((s, x) => s + x, 0) / (lat.length || 1), count: lat.length, failures }) + '\\n');
await pool.close();
`;

export async function load(target: Target, concurrency: number, durationS: number, warmupS: number): Promise<ClientResult> {
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', CLIENT, JSON.stringify({ ...target, concurrency, durationS, warmupS })],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`load client failed (${code}): ${err.trim()}`);
  return JSON.parse(out.trim().split('\n').pop()!) as ClientResult;
}

/**
 * OpenAI-compatible upstream answering every chat completion after a fixed delay. It runs in its
 * own process, as a real provider would: sharing the event loop of the platform under test would
 * bill the upstream's own work (and its timer) to the proxy.
 */
const UPSTREAM = `
import { createServer } from 'node:http';
const delayMs = Number(process.argv[1]);
const answer = (model) => JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 1, model,
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the bench upstream.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 },
});
const server = createServer((req, res) => {
  let raw = '';
  req.setEncoding('utf8');
  req.on('data', (c) => (raw += c));
  req.on('end', () => {
    let model = 'unknown';
    try { model = JSON.parse(raw).model ?? model; } catch {}
    const body = answer(model);
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    }, delayMs);
  });
});
server.keepAliveTimeout = 65000;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
`;

export async function startUpstream(delayMs: number): Promise<{ proc: ChildProcess; base: string }> {
  const proc = spawn(process.execPath, ['--input-type=module', '-e', UPSTREAM, String(delayMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.includes('\n')) resolve(Number(out.trim()));
    });
    proc.on('exit', (code) => reject(new Error(`bench upstream exited (${code})`)));
  });
  return { proc, base: `http://127.0.0.1:${port}/v1` };
}

/** Installs the gateway into a temp folder (never a project dependency) and starts it. */
async function startPortkey(upstreamBase: string): Promise<{ proc: ChildProcess; url: string; note: string } | { error: string }> {
  const dir = process.env.PORTKEY_DIR ?? join(tmpdir(), 'ai-bench-portkey');
  const entry = join(dir, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
  if (!existsSync(entry)) {
    mkdirSync(dir, { recursive: true });
    const npm = spawnSync('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', `@portkey-ai/gateway@${PORTKEY_VERSION}`], {
      encoding: 'utf8',
      timeout: 300_000,
    });
    if (!existsSync(entry))
      return {
        error: `npm install @portkey-ai/gateway@${PORTKEY_VERSION} failed: ${(npm.stderr || npm.error?.message || '').trim().slice(-400)}`,
      };
  }
  const port = await freePort();
  const proc = spawn(process.execPath, [entry, `--port=${port}`, '--headless'], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PORT: String(port) },
  });
  let log = '';
  proc.stdout?.setEncoding('utf8').on('data', (d: string) => (log += d));
  proc.stderr?.setEncoding('utf8').on('data', (d: string) => (log += d));
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;
  const headers = {
    'content-type': 'application/json',
    authorization: 'Bearer bench',
    'x-portkey-provider': 'openai',
    'x-portkey-custom-host': upstreamBase,
  };
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 200));
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'ping' }] }),
      });
      await res.text();
      if (res.ok) return { proc, url, note: `@portkey-ai/gateway@${PORTKEY_VERSION}` };
    } catch {
      // not listening yet
    }
    if (proc.exitCode !== null) break;
  }
  proc.kill('SIGTERM');
  return { error: `Portkey gateway did not answer on port ${port}: ${log.trim().slice(-400)}` };
}

export const median = (xs: number[]) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** The cases of one level; `floor` and the platform variants only where they are measured. */
type Case = Target & { label: string };

/**
 * The least any Node proxy pays on this machine: bare Fastify (no hooks, schemas or logging) that
 * forwards the body to the same upstream through an undici keep-alive pool and answers its JSON.
 * The platform's own overhead is what it adds over this floor.
 */
async function startFloor(upstreamBase: string): Promise<{ app: import('fastify').FastifyInstance; url: string; pool: Pool }> {
  const up = new URL(upstreamBase);
  const pool = new Pool(up.origin, { connections: 256, keepAliveTimeout: 30_000 });
  const app = Fastify({ logger: false });
  app.post('/chat', async (request) => {
    const b = request.body as { model: string; messages: unknown[] };
    const r = await pool.request({
      method: 'POST',
      path: `${up.pathname}/chat/completions`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: b.model, messages: b.messages }),
    });
    const j = (await r.body.json()) as { id: string; model: string; choices: { message: unknown }[]; usage: unknown };
    return { id: j.id, model: j.model, message: j.choices[0]!.message, usage: j.usage, timestamp: new Date().toISOString() };
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, pool, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/chat` };
}

/** Warm per-call cost (µs) of `fn`, the median of 5 batches of `n` calls. */
function microseconds(fn: () => unknown, n = 20_000): number {
  for (let i = 0; i < n; i++) fn();
  const batches: number[] = [];
  for (let b = 0; b < 5; b++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) fn();
    batches.push(Number(process.hrtime.bigint() - t0) / n / 1000);
  }
  return round(median(batches), 2);
}

/** What each step of the proxy path costs on a warm process, in isolation (µs per call). */
async function stepCosts(): Promise<Record<string, number>> {
  const body = JSON.parse(
    JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }] }),
  );
  const validate = validatorCompiler({ schema: chatBody } as never) as (b: unknown) => unknown;
  const serialize = serializerCompiler({ schema: chatResponse, method: 'POST', url: '/api/ai/chat' } as never) as (d: unknown) => string;
  const answer = {
    id: 'chatcmpl-bench',
    model: 'openai/gpt-4o-mini',
    provider: 'router',
    message: { role: 'assistant' as const, content: 'Hello from the bench upstream.' },
    usage: { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 },
    timestamp: new Date().toISOString(),
  };
  const bearer = secretMatcher('bench-internal-key');
  const limiter = createMemoryRateLimiter();
  const headers = { 'x-user-plan': 'network', 'x-stripe-subscription-id': 'sub_bench', 'x-user-id': 'bench-user' };
  const upstreamJson = JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 1,
    model: 'openai/gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the bench upstream.' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 },
  });
  const costs = {
    bodyValidationZod: microseconds(() => validate(body)),
    responseSerializationZod: microseconds(() => serialize(answer)),
    responseJsonStringifyOnly: microseconds(() => JSON.stringify(answer)),
    bearerKeyCheck: microseconds(() => bearer('bench-internal-key')),
    planCheckHeaders: microseconds(() => checkPlan(headers, () => false)),
    upstreamResponseJsonParse: microseconds(() => JSON.parse(upstreamJson)),
    perIpLimiterMemory: 0,
  };
  // the limiter is async (Redis when REDIS_URL is set): time it awaited
  const n = 20_000;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await limiter.consume('ai:127.0.0.1', 1e9, 60_000);
  costs.perIpLimiterMemory = round(Number(process.hrtime.bigint() - t0) / n / 1000, 2);
  await limiter.close();
  return costs;
}

export async function run(): Promise<BenchOutput> {
  const machine = describeMachine();
  const settings = loadSettings({ durationS: 5, warmupS: 1, connections: 64, rounds: 3 });
  // concurrency 1 separates differences of a tenth of a millisecond: more rounds
  const roundsC1 = Number(process.env.BENCH_AI_ROUNDS_C1 ?? Math.max(settings.rounds, 5));
  const delayMs = Number(process.env.BENCH_AI_DELAY_MS ?? 10);
  const redisUrl = process.env.BENCH_REDIS_URL ?? process.env.REDIS_URL;
  const levels = [1, 64];

  const upstream = await startUpstream(delayMs);
  let database: BenchDatabase | undefined;
  let db: Db | undefined;
  const platforms: Platform[] = [];
  const apps: App[] = [];
  let floor: Awaited<ReturnType<typeof startFloor>> | undefined;
  let portkeyProc: ChildProcess | undefined;
  try {
    database = await startBenchDatabase('ai-bench');
    const dir = database.dir;
    const config = loadConfig(
      {
        DATA_DIR: dir,
        LOG_LEVEL: 'silent',
        INTERNAL_API_KEY: 'bench-internal-key',
        ROUTER_API_KEY: 'bench-router-key',
        ROUTER_BASE_URL: upstream.base,
        AI_RATE_LIMIT: '1000000000',
      },
      { cwd: dir, readDotEnv: false },
    );
    db = createDb(database.url, { poolSize: config.DATABASE_POOL_SIZE });
    const secrets = resolveSecrets(config);
    const startBackend = async (extra: Partial<Parameters<typeof createPlatform>[0]> = {}) => {
      const platform = createPlatform({ config, db: db!, secrets, ...extra });
      platforms.push(platform);
      const app = await platform.buildBackendApp();
      apps.push(app);
      await app.listen({ host: '127.0.0.1', port: 0 });
      return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/api/ai/chat`;
    };
    const noUsage: UsageStore = {
      record() {},
      release() {},
      written: () => undefined,
      monthlyTokens: async () => 0,
      pendingAgentCost: () => 0,
      pendingKeyCost: () => 0,
      flush: async () => {},
      ping: async () => {},
      close: async () => {},
    };
    const shipped = await startBackend();
    const withoutUsage = await startBackend({ aiUsageStore: noUsage });
    const infoLogs = await startBackend({
      config: { ...config, LOG_LEVEL: 'info' },
      logger: pino(loggerOptions('info') as pino.LoggerOptions, pino.destination({ dest: '/dev/null', sync: true })),
    });
    const withRedis = redisUrl ? await startBackend({ rateLimiter: createRateLimiter(redisUrl) }) : undefined;
    floor = await startFloor(upstream.base);

    const messages = [{ role: 'user', content: 'Say hello in one short sentence.' }];
    const body = JSON.stringify({ model: 'openai/gpt-4o-mini', messages });
    const platformHeaders = {
      'content-type': 'application/json',
      authorization: 'Bearer bench-internal-key',
      'x-user-plan': 'network',
      'x-stripe-subscription-id': 'sub_bench',
      'x-user-id': 'bench-user',
    };
    const direct: Case = {
      key: 'direct',
      label: 'direct',
      url: `${upstream.base}/chat/completions`,
      headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
      body,
    };
    const floorCase: Case = {
      key: 'floor',
      label: 'floor: bare Fastify + undici proxy',
      url: floor.url,
      headers: { 'content-type': 'application/json' },
      body,
    };
    const platformCase: Case = { key: 'platform', label: '**platform** (as shipped)', url: shipped, headers: platformHeaders, body };
    const variants: Case[] = [
      { key: 'platform_no_usage', label: 'platform, usage recording off', url: withoutUsage, headers: platformHeaders, body },
      { key: 'platform_info_logs', label: 'platform, LOG_LEVEL=info (to /dev/null)', url: infoLogs, headers: platformHeaders, body },
      ...(withRedis
        ? [
            {
              key: 'platform_redis_limiter',
              label: 'platform, per-IP limit in Redis (REDIS_URL)',
              url: withRedis,
              headers: platformHeaders,
              body,
            },
          ]
        : []),
    ];
    const portkey = await startPortkey(upstream.base);
    let portkeyNote: string;
    let portkeyCase: Case | undefined;
    if ('error' in portkey) portkeyNote = portkey.error;
    else {
      portkeyProc = portkey.proc;
      portkeyNote = portkey.note;
      portkeyCase = {
        key: 'portkey',
        label: 'portkey',
        url: portkey.url,
        headers: {
          'content-type': 'application/json',
          authorization: 'Bearer bench',
          'x-portkey-provider': 'openai',
          'x-portkey-custom-host': upstream.base,
        },
        body,
      };
    }
    const casesFor = (c: number): Case[] => [
      direct,
      floorCase,
      platformCase,
      ...(portkeyCase ? [portkeyCase] : []),
      ...(c === 1 ? variants : []),
    ];

    // per level: round-robin rounds over the cases, each measured for durationS
    const results: Record<string, unknown> = {};
    const rows: string[] = [];
    for (const c of levels) {
      const cases = casesFor(c);
      const rounds = c === 1 ? roundsC1 : settings.rounds;
      const perRound: Record<string, ClientResult[]> = {};
      for (let r = 0; r < rounds; r++) {
        for (const target of cases) {
          const res = await load(target, c, settings.durationS, r === 0 ? settings.warmupS : 0.5);
          (perRound[target.key] ??= []).push(res);
        }
      }
      const d = perRound.direct!;
      const summary: Record<string, any> = {};
      for (const target of cases) {
        const runs = perRound[target.key]!;
        const added = (f: (x: ClientResult) => number) => median(runs.map((x, i) => f(x) - f(d[i]!)));
        const s = {
          meanMs: round(median(runs.map((x) => x.meanMs)), 3),
          p50Ms: round(median(runs.map((x) => x.p50Ms)), 3),
          p99Ms: round(median(runs.map((x) => x.p99Ms)), 3),
          rps: round(median(runs.map((x) => x.rps)), 0),
          addedMeanMs: round(
            added((x) => x.meanMs),
            3,
          ),
          addedP50Ms: round(
            added((x) => x.p50Ms),
            3,
          ),
          addedP99Ms: round(
            added((x) => x.p99Ms),
            3,
          ),
          // the case minus the floor in the same round: what the platform itself adds
          overFloorMeanMs: target.key.startsWith('platform')
            ? round(median(runs.map((x, i) => x.meanMs - perRound.floor![i]!.meanMs)), 3)
            : undefined,
          throughputRatioToDirect: round(median(runs.map((x, i) => x.rps / d[i]!.rps)), 3),
          failures: runs.reduce((sum, x) => sum + x.failures, 0),
          rounds: runs,
        };
        summary[target.key] = s;
        const dash = target.key === 'direct';
        rows.push(
          `| ${c} | ${target.label} | ${s.rps} | ${round(s.meanMs, 2)} | ${round(s.p50Ms, 2)} | ${round(s.p99Ms, 2)} | ${dash ? '' : s.addedMeanMs} | ${dash ? '' : s.addedP50Ms} | ${dash ? '' : s.addedP99Ms} | ${s.overFloorMeanMs ?? ''} | ${s.throughputRatioToDirect} | ${s.failures} |`,
        );
      }
      const p = summary.platform;
      const k = summary.portkey;
      if (k) {
        summary.platformVsPortkey = {
          addedMeanRatio: round(p.addedMeanMs / k.addedMeanMs, 3),
          addedP99Ratio: round(p.addedP99Ms / k.addedP99Ms, 3),
          throughputRatio: round(p.throughputRatioToDirect / k.throughputRatioToDirect, 3),
          directVsPortkeyThroughput: round(1 / k.throughputRatioToDirect, 3),
        };
      }
      results[`concurrency${c}`] = summary;
    }
    // as from outside: each server in its own process, a zero-delay upstream, the floor's ratio
    const profileDir = mkdtempSync(join(tmpdir(), 'ai-proxy-profile-'));
    const outside = await measureOutside({
      dataDir: database.dir,
      databaseUrl: database.url,
      rounds: settings.rounds,
      durationS: Number(process.env.BENCH_AI_OUTSIDE_DURATION ?? 6),
      rounds64: OUTSIDE_ROUNDS_64,
      duration64S: OUTSIDE_DURATION_64,
      warmupS: settings.warmupS,
      profileDir,
      latencyClient: load,
    });
    rmSync(profileDir, { recursive: true, force: true });
    results.outside = outside;
    const steps = await stepCosts();
    results.stepCostsUs = steps;
    results.machine = machine;
    results.settings = { ...settings, roundsC1, delayMs, levels, portkey: portkeyNote, redis: Boolean(redisUrl) };

    const cmp = levels
      .map((c) => {
        const s = results[`concurrency${c}`] as Record<string, any>;
        const base =
          `- concurrency ${c}: platform adds ${s.platform.addedMeanMs} ms mean (p50 ${s.platform.addedP50Ms}, p99 ${s.platform.addedP99Ms}) over the direct call; ` +
          `the floor adds ${s.floor.addedMeanMs} ms, so the platform's own share is ${s.platform.overFloorMeanMs} ms; throughput ${s.platform.throughputRatioToDirect} of direct`;
        return s.platformVsPortkey
          ? `${base}; Portkey adds ${s.portkey.addedMeanMs} ms mean, throughput ${s.portkey.throughputRatioToDirect} of direct: ` +
              `**platform throughput ${s.platformVsPortkey.throughputRatio}x Portkey's** (the direct call itself: ${s.platformVsPortkey.directVsPortkeyThroughput}x)`
          : `${base} (Portkey not measured)`;
      })
      .join('\n');
    const stepRows = Object.entries(steps)
      .map(([k, v]) => `| ${k} | ${v} |`)
      .join('\n');
    const markdown = [
      `Machine: ${machineLine(machine)}`,
      '',
      `Upstream: local OpenAI-compatible server answering after a fixed ${delayMs} ms, in its own process. Cases: **direct** (client → upstream), ` +
        '**floor** (client → bare Fastify forwarding through an undici pool → upstream: what any Node proxy pays here), ' +
        '**platform** (client → backend `POST /api/ai/chat` → upstream; bearer key, per-IP limit, plan middleware, zod validation and ' +
        `serialization, usage logged to PostgreSQL), **portkey** (client → ${portkeyNote} → upstream), and at concurrency 1 the platform ` +
        'with one part changed (usage recording off; logging at info; the per-IP limit in Redis when REDIS_URL is set). Load client: a ' +
        `child process with an undici pool and per-request hrtime; round-robin rounds (${roundsC1} at concurrency 1, ${settings.rounds} ` +
        `at 64) of ${settings.durationS} s per case; figures are medians over rounds; "added" is the case minus direct in the same round, ` +
        '"over floor" the case minus the floor in the same round.',
      '',
      '| concurrency | case | req/s | mean ms | p50 ms | p99 ms | added mean ms | added p50 ms | added p99 ms | over floor, mean ms | throughput / direct | failures |',
      '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...rows,
      '',
      cmp,
      '',
      'Warm cost of each step in isolation (µs per call, median of 5 × 20,000 calls in the bench process):',
      '',
      '| step | µs |',
      '|---|---:|',
      stepRows,
      '',
      '### AI proxy against the floor, as from outside',
      '',
      'The figures above put every server in the bench process and give the upstream a 10 ms delay: at concurrency 64 both ' +
        'proxies then wait on the upstream (64 / 10 ms) and carry the same req/s whatever their CPU, which is why this bench ' +
        'once saw 0.97–1.00x where an outside run saw 0.58x. Here every server runs in its own process (upstream answering a ' +
        'fixed 100-token completion at once, the floor — bare Fastify + undici Pool(128) — and the backend with LOG_LEVEL=warn, ' +
        'the per-IP limiter on and AI_RATE_LIMIT lifted), the platform is called with the bearer key and the §4.9 plan headers ' +
        "and a ~2.5 KB body, the **gateway** (the agents' AI gateway, `POST /api/agent-gateway/v1/chat/completions` on the same " +
        "backend) with an agent's `apk_` key (owner on the network plan, AGENT_GATEWAY_RATE_LIMIT lifted) and the same body, " +
        `and autocannon (concurrency 64; at 1 the hrtime client above) loads each case round-robin: at concurrency 1 for ` +
        `${Number(process.env.BENCH_AI_OUTSIDE_DURATION ?? 6)} s per round (${settings.rounds} rounds), at 64 for ${OUTSIDE_DURATION_64} s per round ` +
        `(${OUTSIDE_ROUNDS_64} rounds, each after a 0.5 s warm-up of its case; short rounds measure the floor and each proxy seconds apart on a host ` +
        'whose speed drifts). Ratios are within one round; figures are medians over rounds.',
      '',
      outsideMarkdown(outside),
    ].join('\n');
    return { name: 'ai-proxy', results, markdown };
  } finally {
    portkeyProc?.kill('SIGTERM');
    for (const app of apps) await app.close().catch(() => {});
    await floor?.app.close().catch(() => {});
    await floor?.pool.close().catch(() => {});
    for (const platform of platforms) await platform.close().catch(() => {});
    await db?.close().catch(() => {});
    await database?.stop();
    await stopProcess(upstream.proc);
  }
}
