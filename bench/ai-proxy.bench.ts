/**
 * AI proxy overhead (issue 5): a local OpenAI-compatible upstream with a fixed delay, measured in
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
import { existsSync, mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config/env.ts';
import { resolveSecrets } from '../src/config/secrets.ts';
import { createDb, type Db } from '../src/db/client.ts';
import { freePort } from '../src/db/embedded.ts';
import type { App } from '../src/http/shared/base-app.ts';
import { createPlatform, type Platform } from '../src/platform.ts';
import { type BenchDatabase, startBenchDatabase, stopProcess } from './lib/bench-db.ts';
import { loadSettings } from './lib/load.ts';
import { describeMachine, machineLine } from './lib/machine.ts';
import { type BenchOutput, round } from './lib/report.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PORTKEY_VERSION = '1.15.2';

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

export async function run(): Promise<BenchOutput> {
  const machine = describeMachine();
  const settings = loadSettings({ durationS: 5, warmupS: 1, connections: 64, rounds: 3 });
  const delayMs = Number(process.env.BENCH_AI_DELAY_MS ?? 10);
  const levels = [1, 64];

  const upstream = await startUpstream(delayMs);
  let database: BenchDatabase | undefined;
  let db: Db | undefined;
  let platform: Platform | undefined;
  let backend: App | undefined;
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
    platform = createPlatform({ config, db, secrets: resolveSecrets(config) });
    backend = await platform.buildBackendApp();
    await backend.listen({ host: '127.0.0.1', port: 0 });
    const backendUrl = `http://127.0.0.1:${(backend.server.address() as AddressInfo).port}`;

    const messages = [{ role: 'user', content: 'Say hello in one short sentence.' }];
    const targets: Target[] = [
      {
        key: 'direct',
        url: `${upstream.base}/chat/completions`,
        headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages }),
      },
      {
        key: 'platform',
        url: `${backendUrl}/api/ai/chat`,
        headers: {
          'content-type': 'application/json',
          authorization: 'Bearer bench-internal-key',
          'x-user-plan': 'network',
          'x-stripe-subscription-id': 'sub_bench',
          'x-user-id': 'bench-user',
        },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages }),
      },
    ];
    const portkey = await startPortkey(upstream.base);
    let portkeyNote: string;
    if ('error' in portkey) portkeyNote = portkey.error;
    else {
      portkeyProc = portkey.proc;
      portkeyNote = portkey.note;
      targets.push({
        key: 'portkey',
        url: portkey.url,
        headers: {
          'content-type': 'application/json',
          authorization: 'Bearer bench',
          'x-portkey-provider': 'openai',
          'x-portkey-custom-host': upstream.base,
        },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages }),
      });
    }

    // per level: rounds of (direct, platform, portkey), each measured for durationS
    const results: Record<string, unknown> = {};
    const rows: string[] = [];
    for (const c of levels) {
      const perRound: Record<string, ClientResult[]> = {};
      for (let r = 0; r < settings.rounds; r++) {
        for (const target of targets) {
          const res = await load(target, c, settings.durationS, r === 0 ? settings.warmupS : 0.5);
          (perRound[target.key] ??= []).push(res);
        }
      }
      const direct = perRound.direct!;
      const summary: Record<string, unknown> = {};
      for (const target of targets) {
        const runs = perRound[target.key]!;
        const added50 = median(runs.map((x, i) => x.p50Ms - direct[i]!.p50Ms));
        const added99 = median(runs.map((x, i) => x.p99Ms - direct[i]!.p99Ms));
        const rpsRatio = median(runs.map((x, i) => x.rps / direct[i]!.rps));
        summary[target.key] = {
          p50Ms: round(median(runs.map((x) => x.p50Ms)), 3),
          p99Ms: round(median(runs.map((x) => x.p99Ms)), 3),
          rps: round(median(runs.map((x) => x.rps)), 0),
          addedP50Ms: round(added50, 3),
          addedP99Ms: round(added99, 3),
          throughputRatioToDirect: round(rpsRatio, 3),
          failures: runs.reduce((s, x) => s + x.failures, 0),
          rounds: runs,
        };
        rows.push(
          `| ${c} | ${target.key} | ${round(median(runs.map((x) => x.rps)), 0)} | ${round(median(runs.map((x) => x.p50Ms)), 2)} | ${round(median(runs.map((x) => x.p99Ms)), 2)} | ${target.key === 'direct' ? '' : round(added50, 3)} | ${target.key === 'direct' ? '' : round(added99, 3)} | ${round(rpsRatio, 3)} | ${runs.reduce((s, x) => s + x.failures, 0)} |`,
        );
      }
      const p = summary.platform as { addedP50Ms: number; addedP99Ms: number; throughputRatioToDirect: number };
      const k = summary.portkey as typeof p | undefined;
      if (k) {
        summary.platformVsPortkey = {
          addedP50Ratio: round(p.addedP50Ms / k.addedP50Ms, 3),
          addedP99Ratio: round(p.addedP99Ms / k.addedP99Ms, 3),
          throughputRatio: round(p.throughputRatioToDirect / k.throughputRatioToDirect, 3),
        };
      }
      results[`concurrency${c}`] = summary;
    }
    results.machine = machine;
    results.settings = { ...settings, delayMs, levels, portkey: portkeyNote };

    const cmp = levels
      .map((c) => {
        const s = results[`concurrency${c}`] as Record<string, any>;
        return s.platformVsPortkey
          ? `- concurrency ${c}: platform added p50 ${s.platform.addedP50Ms} ms vs Portkey ${s.portkey.addedP50Ms} ms (ratio ${s.platformVsPortkey.addedP50Ratio}); ` +
              `added p99 ${s.platform.addedP99Ms} ms vs ${s.portkey.addedP99Ms} ms (ratio ${s.platformVsPortkey.addedP99Ratio}); ` +
              `throughput ${s.platform.throughputRatioToDirect} vs ${s.portkey.throughputRatioToDirect} of direct (ratio ${s.platformVsPortkey.throughputRatio})`
          : `- concurrency ${c}: platform added p50 ${s.platform.addedP50Ms} ms, p99 ${s.platform.addedP99Ms} ms; throughput ${s.platform.throughputRatioToDirect} of direct (Portkey not measured)`;
      })
      .join('\n');
    const markdown = [
      `Machine: ${machineLine(machine)}`,
      '',
      `Upstream: local OpenAI-compatible server answering after a fixed ${delayMs} ms. Cases: **direct** (client → upstream), ` +
        '**platform** (client → backend `POST /api/ai/chat` → upstream; bearer key, per-IP limit, plan middleware, validation, usage ' +
        `logged to PostgreSQL), **portkey** (client → ${portkeyNote} → upstream). Load client: a child process with an undici ` +
        `pool and per-request hrtime; ${settings.rounds} round-robin rounds of ${settings.durationS} s per case and level; figures are ` +
        'medians over rounds; added latency is the case minus direct in the same round.',
      '',
      '| concurrency | case | req/s | p50 ms | p99 ms | added p50 ms | added p99 ms | throughput / direct | failures |',
      '|---:|---|---:|---:|---:|---:|---:|---:|---:|',
      ...rows,
      '',
      cmp,
    ].join('\n');
    return { name: 'ai-proxy', results, markdown };
  } finally {
    portkeyProc?.kill('SIGTERM');
    await backend?.close().catch(() => {});
    await platform?.close().catch(() => {});
    await db?.close().catch(() => {});
    await database?.stop();
    await stopProcess(upstream.proc);
  }
}
