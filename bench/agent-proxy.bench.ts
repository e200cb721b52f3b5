/**
 * The authenticated gateway proxy (docs/agents.md "Talk to your agent"), in one run:
 *   direct — the agent's own gateway `POST /v1/chat/completions` with its gateway token;
 *   proxy  — the same call through the web app, `POST /api/agents/:id/v1/chat/completions` with
 *            the owner's `sk_` key (key check, row-level-security lookup of the agent, token
 *            decryption, streaming pass-through).
 * One real local agent (built-in runtime, its model a local upstream in its own process answering
 * after BENCH_AI_DELAY_MS). Goal: the proxy adds under 1 ms mean at concurrency 1.
 *   floor  — a bare Node proxy in its own process (bench/lib/proxy-processes.ts: Fastify + undici)
 *            in front of the same agent gateway, adding its token: what any Node proxy pays here.
 *            The proxy's own share is proxy − floor per round, at concurrency 1 and 64 (req/s ratio).
 * Then idle WebSockets through the proxy (clients in their own process; as many as one user may
 * hold, 32: docs/security.md N10): the web app's resident memory before, with them open, and 10 s
 * later (flat).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { loadConfig } from '../src/config/env.ts';
import { resolveSecrets } from '../src/config/secrets.ts';
import { createDb, type Db } from '../src/db/client.ts';
import { freePort } from '../src/db/embedded.ts';
import type { HostingDriver } from '../src/domains/agents/drivers/driver.contract.ts';
import { createLocalDriver } from '../src/domains/agents/drivers/local/local.driver.ts';
import type { App } from '../src/http/shared/base-app.ts';
import { decryptSecret } from '../src/lib/crypto.ts';
import { createPlatform, type Platform } from '../src/platform.ts';
import { type ClientResult, load, median, startUpstream, type Target } from './ai-proxy.bench.ts';
import { type BenchDatabase, startBenchDatabase, stopProcess } from './lib/bench-db.ts';
import { loadSettings } from './lib/load.ts';
import { describeMachine, machineLine } from './lib/machine.ts';
import { servePlatform, signUp } from './lib/platform-api.ts';
import { startFloorProcess } from './lib/proxy-processes.ts';
import { type BenchOutput, round } from './lib/report.ts';

/** Opens N WebSockets to `url` with `authorization`, prints "open" when all are, holds them until stdin closes. */
const SOCKETS = `
import WebSocket from 'ws';
const { url, authorization, n } = JSON.parse(process.argv[1]);
let open = 0;
const sockets = [];
for (let i = 0; i < n; i++) {
  const s = new WebSocket(url, { headers: { authorization } });
  s.on('open', () => { if (++open === n) process.stdout.write('open\\n'); });
  s.on('error', (e) => { process.stderr.write(String(e.message) + '\\n'); process.exit(1); });
  sockets.push(s);
}
process.stdin.on('end', () => { for (const s of sockets) s.terminate(); process.exit(0); });
process.stdin.resume();
`;

const rssMb = () => process.memoryUsage().rss / 1024 / 1024;
const settle = async () => {
  globalThis.gc?.();
  await new Promise((r) => setTimeout(r, 1000));
};

export async function run(): Promise<BenchOutput> {
  const machine = describeMachine();
  const settings = loadSettings({ durationS: 5, warmupS: 1, connections: 1, rounds: 3 });
  const delayMs = Number(process.env.BENCH_AI_DELAY_MS ?? 10);
  // one user may hold 32 proxied sockets at once (429 beyond, docs/security.md N10); more needs more users and agents
  const sockets = Number(process.env.BENCH_PROXY_SOCKETS ?? 32);
  const upstream = await startUpstream(delayMs);
  let database: BenchDatabase | undefined;
  let db: Db | undefined;
  let platform: Platform | undefined;
  let web: App | undefined;
  let backend: App | undefined;
  let floor: Awaited<ReturnType<typeof startFloorProcess>> | undefined;
  let driver: HostingDriver | undefined;
  try {
    database = await startBenchDatabase('agent-proxy-bench');
    const dir = database.dir;
    const [webPort, backendPort] = [await freePort(), await freePort()];
    const config = loadConfig(
      {
        DATA_DIR: dir,
        LOG_LEVEL: 'silent',
        WEB_PORT: String(webPort),
        BACKEND_PORT: String(backendPort),
        PUBLIC_URL: `http://127.0.0.1:${webPort}`,
        INTERNAL_API_KEY: 'bench-internal-key',
        HOSTING_DRIVER: 'local',
        AGENT_RUNTIME: 'builtin',
        ROUTER_API_KEY: 'bench-router-key',
        ROUTER_BASE_URL: upstream.base,
        // the agent's model calls go through the platform's AI gateway: its per-agent limit (60 a
        // minute) lifted, as the AI proxy bench lifts AI_RATE_LIMIT
        AGENT_GATEWAY_RATE_LIMIT: '1000000000',
      },
      { cwd: dir, readDotEnv: false },
    );
    db = createDb(database.url, { poolSize: config.DATABASE_POOL_SIZE });
    const secrets = resolveSecrets(config);
    // the agent's own flood limits lifted (4 model calls at once and a queue of 32 by default): at
    // concurrency 64 it would otherwise answer most requests 503 at once, and the case would measure
    // that storm of rejections rather than the path (as the AI bench lifts AI_RATE_LIMIT)
    driver = createLocalDriver({
      dataDir: dir,
      runtime: 'builtin',
      extraEnv: { AGENT_MAX_CONCURRENT_MODEL_CALLS: '128', AGENT_MODEL_QUEUE: '128' },
    });
    platform = createPlatform({ config, db, secrets, driver });
    const served = await servePlatform(platform, { web: webPort, backend: backendPort });
    ({ web, backend } = served);
    const { base, call } = served;
    const cookie = await signUp(call, `bench${Date.now()}@example.com`);
    const key = ((await (await call('POST', '/api/keys', { name: 'bench' }, { cookie })).json()) as { key: string }).key;
    const agentId = (
      (await (await call('POST', '/api/agents/provision', { name: 'Bench' }, { cookie })).json()) as { agent: { id: string } }
    ).agent.id;
    for (let i = 0; ; i++) {
      const a = ((await (await call('GET', `/api/agents/${agentId}`, undefined, { cookie })).json()) as { agent: { status: string } })
        .agent;
      if (a.status === 'running') break;
      if (a.status === 'error' || i > 300) throw new Error(`agent did not start: ${a.status}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const row = await db.kysely.selectFrom('agents').select('gateway_url').where('id', '=', agentId).executeTakeFirstOrThrow();
    const creds = await db.kysely
      .selectFrom('agent_credentials')
      .select('gateway_token_enc')
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    const token = decryptSecret(secrets.secretsEncryptionKey, creds.gateway_token_enc);

    const body = JSON.stringify({ model: 'auto', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }] });
    floor = await startFloorProcess(new URL(row.gateway_url!).origin, { authorization: `Bearer ${token}` });
    const targets: Target[] = [
      { key: 'floor', url: floor.url, headers: { 'content-type': 'application/json' }, body },
      {
        key: 'direct',
        url: `${row.gateway_url}/v1/chat/completions`,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body,
      },
      {
        key: 'proxy',
        url: `${base}/api/agents/${agentId}/v1/chat/completions`,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body,
      },
    ];
    for (const t of targets) {
      const res = await fetch(t.url, { method: 'POST', headers: t.headers, body: t.body });
      if (res.status !== 200) throw new Error(`${t.key} case answered ${res.status}: ${await res.text()}`);
      await res.text();
    }

    const perRound: Record<string, ClientResult[]> = {};
    for (let r = 0; r < settings.rounds; r++) {
      for (const target of targets)
        (perRound[target.key] ??= []).push(await load(target, 1, settings.durationS, r === 0 ? settings.warmupS : 0.5));
    }
    const d = perRound.direct!;
    const p = perRound.proxy!;
    const f = perRound.floor!;
    const addedMean = median(p.map((x, i) => x.meanMs - d[i]!.meanMs));
    const addedP50 = median(p.map((x, i) => x.p50Ms - d[i]!.p50Ms));
    const overFloorMean = median(p.map((x, i) => x.meanMs - f[i]!.meanMs));
    // concurrency 64: the proxy's throughput over the floor's, per round
    const at64: Record<string, ClientResult[]> = {};
    for (let r = 0; r < settings.rounds; r++) {
      for (const target of targets.filter((t) => t.key !== 'direct'))
        (at64[target.key] ??= []).push(await load(target, 64, settings.durationS, r === 0 ? settings.warmupS : 0.5));
    }
    const ratio64 = at64.proxy!.map((x, i) => round(x.rps / at64.floor![i]!.rps, 3));

    // idle WebSockets through the proxy
    await settle();
    const before = rssMb();
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        SOCKETS,
        JSON.stringify({ url: `${base.replace(/^http/, 'ws')}/api/agents/${agentId}/ws`, authorization: `Bearer ${key}`, n: sockets }),
      ],
      {
        cwd: join(import.meta.dirname, '..'),
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let childErr = '';
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (childErr += s));
    await new Promise<void>((resolve, reject) => {
      child.stdout!.setEncoding('utf8').on('data', (s: string) => s.includes('open') && resolve());
      child.on('exit', (code) => reject(new Error(`socket client exited (${code}): ${childErr.trim().slice(-300)}`)));
    });
    await settle();
    const withSockets = rssMb();
    await new Promise((r) => setTimeout(r, 10_000));
    await settle();
    const later = rssMb();
    child.stdin!.end();
    await new Promise((r) => child.once('exit', r));

    const results = {
      machine,
      settings: { ...settings, delayMs, sockets },
      direct: d,
      proxy: p,
      addedMeanMs: round(addedMean, 3),
      addedP50Ms: round(addedP50, 3),
      floor: f,
      overFloorMeanMs: round(overFloorMean, 3),
      concurrency64: { floor: at64.floor, proxy: at64.proxy, proxyOverFloorThroughput: ratio64 },
      webRssMb: { before: round(before, 1), withSockets: round(withSockets, 1), tenSecondsLater: round(later, 1) },
    };
    const row2 = (name: string, runs: ClientResult[]) =>
      `| ${name} | ${round(median(runs.map((x) => x.rps)), 0)} | ${round(median(runs.map((x) => x.meanMs)), 3)} | ${round(median(runs.map((x) => x.p50Ms)), 3)} | ${round(median(runs.map((x) => x.p99Ms)), 3)} | ${runs.reduce((a, x) => a + x.failures, 0)} |`;
    const markdown = [
      `Machine: ${machineLine(machine)}`,
      '',
      'One real local agent (built-in runtime) whose model is a local upstream in its own process answering after a fixed ' +
        `${delayMs} ms. **direct**: the agent's gateway \`POST /v1/chat/completions\` with its gateway token; **proxy**: the same call ` +
        "through the web app at `POST /api/agents/:id/v1/chat/completions` with the owner's `sk_` key; **floor**: a bare Node proxy " +
        '(Fastify + undici, its own process) in front of the same gateway. Concurrency 1 (and 64 for floor and proxy), ' +
        `${settings.rounds} alternating rounds of ${settings.durationS} s; the added time is per round (proxy − direct), then the median.`,
      '',
      '| case | req/s | mean ms | p50 ms | p99 ms | failures |',
      '|---|---:|---:|---:|---:|---:|',
      row2('direct', d),
      row2('floor', f),
      row2('proxy', p),
      '',
      `- the proxy adds **${round(addedMean, 3)} ms** mean (p50 ${round(addedP50, 3)} ms) at concurrency 1 (goal < 1 ms); over the floor ` +
        `(a bare Node proxy, its own process, in front of the same gateway) **${round(overFloorMean, 3)} ms** (goal ≤ 0.2 ms)`,
      `- concurrency 64 (the agent's model-call limits lifted): proxy / floor req/s **${median(ratio64)}** (rounds: ${ratio64.join(', ')}; goal ≥ 0.9); floor ` +
        `${round(median(at64.floor!.map((x) => x.rps)), 0)} req/s, proxy ${round(median(at64.proxy!.map((x) => x.rps)), 0)} req/s; ` +
        `failures floor ${at64.floor!.reduce((a, x) => a + x.failures, 0)}, proxy ${at64.proxy!.reduce((a, x) => a + x.failures, 0)}`,
      `- ${sockets} idle WebSockets through the proxy (clients in another process): web app resident memory ${round(before, 1)} MB before, ` +
        `${round(withSockets, 1)} MB with them open (${round(((withSockets - before) * 1024) / sockets, 1)} KB each, both legs), ${round(later, 1)} MB ten seconds later`,
    ].join('\n');
    return { name: 'agent-proxy', results, markdown };
  } finally {
    await web?.close().catch(() => {});
    await backend?.close().catch(() => {});
    await platform?.close().catch(() => {});
    await driver?.shutdown().catch(() => {});
    await db?.close().catch(() => {});
    await database?.stop();
    if (floor) await stopProcess(floor.proc);
    await stopProcess(upstream.proc);
  }
}
