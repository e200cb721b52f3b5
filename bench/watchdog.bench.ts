/**
 * Watchdog cost: 200 watched agents, their /healthz served by one child process,
 * with the §8 timings (check every 120 s, poll every 1 s, lease 30 s). Measures the CPU time of
 * this (backend) process over one full check interval with the watchdog running, against the same
 * process idle for the same time, as a percentage of one core; and the resident memory of one
 * idle built-in-runtime agent, against a bare Node process.
 * BENCH_WATCHDOG_AGENTS (200) and BENCH_WATCHDOG_WINDOW (seconds, 120) change the sizes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { loadConfig } from '../src/config/env.ts';
import { storedSecret } from '../src/config/secrets.ts';
import { createDb, type Db } from '../src/db/client.ts';
import { type EmbeddedServer, freePort, startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { probeHealthz } from '../src/domains/agents/agent-client/health-probe.client.ts';
import { createAgentDirectory } from '../src/domains/agents/agent-records.service.ts';
import { treeUsage } from '../src/domains/agents/drivers/local/containment/proc.service.ts';
import { FIRST_AGENT_UID } from '../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { createLocalDriver } from '../src/domains/agents/drivers/local/local.driver.ts';
import { createLifecycleLocks } from '../src/domains/agents/lifecycle-locks.service.ts';
import { createWatchdogService, watchdogSettingsFromConfig } from '../src/domains/watchdog/watchdog.service.ts';
import { createWatchdogWorker } from '../src/workers/watchdog.ts';
import { type BenchOutput, round } from './lib/report.ts';

const AGENTS = Number(process.env.BENCH_WATCHDOG_AGENTS ?? 200);
const WINDOW_S = Number(process.env.BENCH_WATCHDOG_WINDOW ?? 120);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** One process answering GET <anything>/healthz like an agent. */
async function startHealthServer(): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      '-e',
      `require('node:http').createServer((q,s)=>{s.writeHead(q.url.endsWith('/healthz')?200:404,{'content-type':'application/json'});s.end('{"ok":true,"status":"live"}')}).listen(${port},'127.0.0.1')`,
    ],
    { stdio: 'ignore' },
  );
  while (!(await probeHealthz(`http://127.0.0.1:${port}/x`, 500))) await sleep(20);
  return { port, child };
}

async function rssOf(pid: number): Promise<number> {
  return treeUsage(pid)?.rssBytes ?? 0;
}

export async function run(): Promise<BenchOutput> {
  const dir = mkdtempSync(join(tmpdir(), 'watchdog-bench-'));
  chmodSync(dir, 0o755);
  let embedded: EmbeddedServer | undefined;
  let db: Db | undefined;
  let health: { port: number; child: ChildProcess } | undefined;
  const started = new Date().toISOString();
  const load = loadavg()[0]!;
  try {
    const config = loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'warn', HOSTING_DRIVER: 'local' }, { cwd: dir, readDotEnv: false });
    embedded = await startEmbeddedPostgres({
      dataDir: dir,
      password: storedSecret(dir, 'embeddedDbPassword', () => `bench-${Date.now().toString(36)}`),
    });
    await migrate(embedded.url);
    db = createDb(embedded.url, { poolSize: 10 });
    health = await startHealthServer();

    const user = await sql<{
      id: string;
    }>`insert into users (email, name, referral_code) values ('bench@example.com', 'bench', 'BENCHWD') returning id`.execute(db.kysely);
    const userId = user.rows[0]!.id;
    for (let i = 0; i < AGENTS; i++) {
      const id = `wd-bench-${i}`;
      await sql`insert into agents (id, user_id, name, status, subdomain, url, gateway_url)
                values (${id}, ${userId}, ${id}, 'running', ${id}, ${`https://${id}.agents.localhost`}, ${`http://127.0.0.1:${health.port}/${id}`})`.execute(
        db.kysely,
      );
    }

    const driver = createLocalDriver({ dataDir: join(dir, 'agents-unused') });
    const settings = watchdogSettingsFromConfig(config);
    const watchdog = createWatchdogService({
      db,
      driver,
      agents: createAgentDirectory(db, createLifecycleLocks()),
      settings,
      channels: [],
    });
    const worker = createWatchdogWorker({ watchdog, channels: [] });

    // idle: the same process doing nothing for a while (timers of the pool, GC)
    const idleS = Math.min(20, WINDOW_S);
    let c0 = cpuMs();
    let t0 = performance.now();
    await sleep(idleS * 1000);
    const idlePct = ((cpuMs() - c0) / (performance.now() - t0)) * 100;

    // warm-up: the first round checks every agent at once (all due); wait until all are running
    const w0 = performance.now();
    const wc0 = cpuMs();
    await worker.start();
    for (;;) {
      const r = await sql<{ n: number }>`select count(*)::int as n from agent_watchdog where state = 'running'`.execute(db.kysely);
      if (r.rows[0]!.n >= AGENTS) break;
      await sleep(100);
    }
    const firstRoundMs = performance.now() - w0;
    const firstRoundCpuMs = cpuMs() - wc0;

    // steady state over one full check interval: every agent probed once, polls every second
    c0 = cpuMs();
    t0 = performance.now();
    await sleep(WINDOW_S * 1000);
    const wallMs = performance.now() - t0;
    const busyPct = ((cpuMs() - c0) / wallMs) * 100;
    const checks = await sql<{
      n: number;
    }>`select count(*)::int as n from agent_watchdog where last_check_at > now() - make_interval(secs => ${wallMs / 1000})`.execute(
      db.kysely,
    );
    await worker.stop();

    // one idle built-in-runtime agent's resident memory, and a bare Node process for comparison
    const agentDriver = createLocalDriver({ dataDir: join(dir, 'agent'), runtime: 'builtin' });
    let agentRss = 0;
    try {
      const d = await agentDriver.deploy({
        agentId: 'rss-agent',
        userId,
        plan: 'label',
        gatewayToken: 'x'.repeat(48),
        platformApiKey: 'apk_bench',
        backendUrl: 'http://127.0.0.1:9',
        config: {},
        // sandboxed as root, an agent needs a user of its own (the database allocates it; any free uid here)
        ...(process.getuid?.() === 0 ? { sandboxUid: FIRST_AGENT_UID + 999_000_001 } : {}),
      });
      while (!(await probeHealthz(d.url, 1000))) await sleep(20);
      await sleep(5_000);
      agentRss = (await agentDriver.stats('rss-agent')).memory;
    } finally {
      await agentDriver.shutdown();
    }
    const bare = spawn(process.execPath, ['-e', 'setInterval(()=>{},1000)'], { stdio: 'ignore' });
    await sleep(2_000);
    const bareRss = await rssOf(bare.pid!);
    bare.kill('SIGKILL');

    const overhead = Math.max(0, busyPct - idlePct);
    const results = {
      agents: AGENTS,
      windowSeconds: round(wallMs / 1000, 1),
      checkIntervalSeconds: settings.checkIntervalMs / 1000,
      pollMs: settings.pollMs,
      checksInWindow: checks.rows[0]!.n,
      cpuPercentOneCoreWithWatchdog: round(busyPct, 2),
      cpuPercentOneCoreIdle: round(idlePct, 2),
      watchdogCpuPercentOneCore: round(overhead, 2),
      firstRoundMs: round(firstRoundMs, 0),
      firstRoundCpuMs: round(firstRoundCpuMs, 0),
      agentRssMb: round(agentRss / 1048576, 1),
      bareNodeRssMb: round(bareRss / 1048576, 1),
    };
    const markdown = [
      `Machine: ${cpus()[0]?.model ?? 'unknown'}, ${cpus().length} cores, Node ${process.version}; load average ${load.toFixed(2)} at start; ${started}.`,
      '',
      `${AGENTS} agents with status \`running\`, their \`/healthz\` served by one child process; watchdog with the §8 timings (check every ${settings.checkIntervalMs / 1000} s, poll every ${settings.pollMs} ms, lease ${settings.leaseMs / 1000} s), no notification channel.`,
      '',
      '| measure | value |',
      '|---|---:|',
      `| backend CPU, watchdog running, over ${results.windowSeconds} s (one check interval; ${results.checksInWindow} checks) | ${results.cpuPercentOneCoreWithWatchdog}% of one core |`,
      `| backend CPU, same process idle (${idleS} s) | ${results.cpuPercentOneCoreIdle}% |`,
      `| **watchdog cost** (difference) | **${results.watchdogCpuPercentOneCore}% of one core** (goal < 2%) |`,
      `| first round (all ${AGENTS} due at once) | ${results.firstRoundMs} ms wall, ${results.firstRoundCpuMs} ms CPU |`,
      `| resident memory of one idle built-in-runtime agent (process tree, runtime run from the sources; compiled: the memory bench) | ${results.agentRssMb} MB |`,
      `| resident memory of a bare Node process (\`setInterval\` only), same Node | ${results.bareNodeRssMb} MB |`,
      '',
      "Per poll a backend runs the sync of the watched set (three statements), an adoption query and the due query; a healthy agent costs one HTTP GET per interval and one fenced UPDATE. PostgreSQL's own CPU (another process) is not counted above.",
    ].join('\n');
    return { name: 'watchdog', results, markdown };
  } finally {
    health?.child.kill('SIGKILL');
    await db?.close().catch(() => {});
    await embedded?.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}
