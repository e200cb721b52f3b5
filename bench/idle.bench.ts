/**
 * Idle agents (docs/agents.md "Idle agents sleep"), on the platform as `npm start` runs it (the
 * sources compiled by scripts/build-server.ts and loaded from that copy, so the local driver starts
 * the compiled runtime), its embedded PostgreSQL, the agents' model a local upstream answering at once.
 *
 * 1. Wake: AGENT_IDLE_SUSPEND_S=1, one built-in agent. Each round waits until the agent is suspended
 *    and none of its processes is left, then sends a streamed chat completion through the agent proxy
 *    (`POST /api/agents/:id/v1/chat/completions`, the owner's `sk_` key) and times the first byte of
 *    the answer's body; then the same call to the agent awake, for comparison. Goal: wake to first
 *    reply byte p50 ≤ 300 ms, p99 ≤ 1 s. Also: what a suspended agent holds (its processes, its cgroup).
 * 2. Many agents: BENCH_IDLE_AGENTS (1,000) agents, every one provisioned through the API and started
 *    as a real sandboxed process. First BENCH_IDLE_AGENTS − BENCH_IDLE_AWAKE (950) of them, under a
 *    platform with AGENT_IDLE_SUSPEND_S=2, in waves (an agent per owner's plan limit of 100, so
 *    several owners), each wave waited for until the idle sweep has suspended it; then that platform
 *    stops and another starts on the same database and DATA_DIR with AGENT_IDLE_SUSPEND_S=3600 (the
 *    sweep runs, nothing is idle long enough) and provisions the BENCH_IDLE_AWAKE (50) that stay
 *    awake. Reported: the platform process's resident memory, a full watchdog pass over the watched
 *    agents (all made due at once, until each was checked), and the idle sweep's look over all
 *    the records.
 * The many-agents part runs first, so the process's reading holds no earlier platform.
 * BENCH_WAKE_ROUNDS (40), BENCH_IDLE_AGENTS (1000) and BENCH_IDLE_AWAKE (50) set the sizes.
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { buildServer } from '../scripts/build-server.ts';
import { freePort } from '../src/db/embedded.ts';
import { isAlive, processTree } from '../src/domains/agents/drivers/local/containment/proc.service.ts';
import type { Platform } from '../src/platform.ts';
import { startUpstream } from './ai-proxy.bench.ts';
import { type BenchDatabase, startBenchDatabase, stopProcess } from './lib/bench-db.ts';
import { describeMachine, machineLine } from './lib/machine.ts';
import { servePlatform, signUp } from './lib/platform-api.ts';
import { type BenchOutput, round } from './lib/report.ts';

const ROOT = join(import.meta.dirname, '..');
/** A full collection, then the V8 heap in use (MB): what the platform's objects hold, without what the process's allocator keeps. */
const heapMb = () => {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
  return process.memoryUsage().heapUsed / 1024 / 1024;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]!;
};
const statusKb = (pid: number, field: string) => {
  try {
    return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
};
const pssKb = (pid: number) => {
  try {
    return Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
};
/** `pid` and every process below it, from /proc (the local driver's own reading) */
const tree = (pid: number): number[] => processTree(pid).map((s) => s.pid);

type Compiled = {
  loadConfig: typeof import('../src/config/env.ts').loadConfig;
  resolveSecrets: typeof import('../src/config/secrets.ts').resolveSecrets;
  createDb: typeof import('../src/db/client.ts').createDb;
  createPlatform: typeof import('../src/platform.ts').createPlatform;
};

async function loadCompiled(out: string): Promise<Compiled> {
  const mod = (p: string) => import(pathToFileURL(join(out, p)).href);
  return {
    loadConfig: (await mod('config/env.js')).loadConfig,
    resolveSecrets: (await mod('config/secrets.js')).resolveSecrets,
    createDb: (await mod('db/client.js')).createDb,
    createPlatform: (await mod('platform.js')).createPlatform,
  };
}

/**
 * A platform of the compiled tree, listening, on a fresh database and DATA_DIR, or on `shared`'s
 * (left running at close, for the next platform); `env` on top of the bench's.
 */
async function startPlatform(c: Compiled, modelBase: string, env: Record<string, string>, shared?: BenchDatabase) {
  const database = shared ?? (await startBenchDatabase('idle-bench'));
  const [webPort, backendPort] = [await freePort(), await freePort()];
  const config = c.loadConfig(
    {
      DATA_DIR: database.dir,
      LOG_LEVEL: 'silent',
      WEB_PORT: String(webPort),
      BACKEND_PORT: String(backendPort),
      PUBLIC_URL: `http://127.0.0.1:${webPort}`,
      INTERNAL_API_KEY: 'bench-internal-key',
      HOSTING_DRIVER: 'local',
      AGENT_RUNTIME: 'builtin',
      ROUTER_API_KEY: 'bench-router-key',
      ROUTER_BASE_URL: modelBase,
      AGENT_GATEWAY_RATE_LIMIT: '1000000000',
      REGISTER_RATE_LIMIT: '100000',
      ...env,
    },
    { cwd: database.dir, readDotEnv: false },
  );
  const db = c.createDb(database.url, { poolSize: config.DATABASE_POOL_SIZE });
  const platform: Platform = c.createPlatform({ config, db, secrets: c.resolveSecrets(config) });
  const { web, backend, base, call } = await servePlatform(platform, { web: webPort, backend: backendPort });
  /** a new owner on the plan with the most agents (up to 100 each), signed in: their session cookie */
  const newOwner = () => {
    const email = `bench-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.com`;
    return signUp(call, email, () =>
      db.kysely.updateTable('users').set({ subscription_status: 'active', plan: 'network' }).where('email', '=', email).execute(),
    );
  };
  const cookie = await newOwner();
  const key = ((await (await call('POST', '/api/keys', { name: 'bench' }, { cookie })).json()) as { key: string }).key;
  const provision = async (name: string, owner = cookie) => {
    const res = await call('POST', '/api/agents/provision', { name }, { cookie: owner });
    if (res.status !== 201) throw new Error(`provision answered ${res.status}: ${await res.text()}`);
    return ((await res.json()) as { agent: { id: string } }).agent.id;
  };
  const statusOf = async (agentId: string) =>
    (await db.kysely.selectFrom('agents').select('status').where('id', '=', agentId).executeTakeFirstOrThrow()).status;
  const until = async (agentId: string, want: string, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await statusOf(agentId);
      if (s === want) return;
      if (s === 'error' || Date.now() > deadline) throw new Error(`agent ${agentId} is ${s}, not ${want}`);
      await sleep(20);
    }
  };
  const statePid = (agentId: string) =>
    JSON.parse(readFileSync(join(database.dir, 'agents', agentId, 'driver-state.json'), 'utf8')).pid as number;
  return {
    platform,
    db,
    base,
    key,
    newOwner,
    provision,
    until,
    statePid,
    dir: database.dir,
    async close() {
      await Promise.allSettled([web.close(), backend.close()]);
      await platform.close();
      await db.close();
      if (!shared) await database.stop();
    },
  };
}

/** A streamed chat completion through the proxy: ms to the first byte of the body, then read to the end. */
async function firstByteMs(base: string, key: string, agentId: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${base}/api/agents/${agentId}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ stream: true, messages: [{ role: 'user', content: 'hello' }] }),
  });
  const reader = res.body!.getReader();
  const first = await reader.read();
  const ms = performance.now() - started;
  if (res.status !== 200 || first.done) throw new Error(`the chat answered ${res.status}`);
  while (!(await reader.read()).done) {}
  return ms;
}

export async function run(): Promise<BenchOutput> {
  const machine = describeMachine();
  const rounds = Number(process.env.BENCH_WAKE_ROUNDS ?? 40);
  const total = Number(process.env.BENCH_IDLE_AGENTS ?? 1000);
  const awake = Number(process.env.BENCH_IDLE_AWAKE ?? 50);
  const out = join(ROOT, `.dist-bench-${process.pid}`);
  const upstream = await startUpstream(0);
  try {
    buildServer(out);
    const compiled = await loadCompiled(out);

    // 2. 1,000 agents, 50 of them awake: the sleepers first, each started and suspended by the sweep
    const shared = await startBenchDatabase('idle-bench');
    const sleepers = total - awake;
    const startedSleepers = performance.now();
    const s = await startPlatform(compiled, upstream.base, { AGENT_IDLE_SUSPEND_S: '2' }, shared);
    try {
      const WAVE = 25;
      let owner = await s.newOwner();
      for (let i = 0; i < sleepers; i += WAVE) {
        const wave: string[] = [];
        for (let j = i; j < Math.min(sleepers, i + WAVE); j++) {
          if (j > 0 && j % 100 === 0) owner = await s.newOwner();
          wave.push(await s.provision(`Sleeper ${j}`, owner));
        }
        for (const id of wave) await s.until(id, 'suspended', 180_000);
      }
    } finally {
      await s.close();
    }
    const sleepersMs = performance.now() - startedSleepers;
    const q = await startPlatform(compiled, upstream.base, { AGENT_IDLE_SUSPEND_S: '3600' }, shared);
    let many: {
      agents: number;
      awake: number;
      suspended: number;
      watched: number;
      sleepersMs: number;
      platformRssStartMb: number;
      platformRssMb: number;
      platformHeapStartMb: number;
      platformHeapMb: number;
      agentsRssMb: number;
      agentsPssMb: number;
      watchdogPassMs: number;
      sweepLookMs: number;
    };
    try {
      const rssStart = process.memoryUsage().rss;
      const heapStart = heapMb();
      const ids: string[] = [];
      for (let i = 0; i < awake; i++) ids.push(await q.provision(`Awake ${i}`));
      for (const id of ids) await q.until(id, 'running', 120_000);
      const countSuspended = async () =>
        Number(
          (
            await q.db.kysely
              .selectFrom('agents')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('status', '=', 'suspended')
              .executeTakeFirstOrThrow()
          ).n,
        );
      const suspended = await countSuspended();
      if (suspended !== sleepers) throw new Error(`${suspended} agents suspended, not ${sleepers}`);
      await sleep(10_000);
      const rssIdle = process.memoryUsage().rss;
      const heapIdle = heapMb();
      const agentTrees = ids.map((id) => tree(q.statePid(id)));
      const sumKb = (f: (pid: number) => number) => agentTrees.flat().reduce((s, pid) => s + f(pid), 0);
      // a full watchdog pass: every watched agent due now, until each has been checked
      const watched = Number(
        (
          await q.db.kysely
            .selectFrom('agent_watchdog')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            // a suspended agent's row rests (state stopped) until it is woken
            .where('state', '<>', 'stopped')
            .executeTakeFirstOrThrow()
        ).n,
      );
      const passStart = new Date();
      const t0 = performance.now();
      await q.db.kysely.updateTable('agent_watchdog').set({ next_check_at: passStart }).execute();
      for (;;) {
        const left = await q.db.kysely
          .selectFrom('agent_watchdog')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where((eb) => eb.or([eb('last_check_at', 'is', null), eb('last_check_at', '<', passStart)]))
          .where('state', '<>', 'stopped')
          .executeTakeFirstOrThrow();
        if (Number(left.n) === 0) break;
        if (performance.now() - t0 > 120_000) throw new Error(`${left.n} agents not checked in 120 s`);
        await sleep(10);
      }
      const passMs = performance.now() - t0;
      // the pass woke nothing: a sleeping agent is not the watchdog's to repair
      const stillAsleep = await countSuspended();
      if (stillAsleep !== sleepers) throw new Error(`${stillAsleep} agents suspended after the watchdog pass, not ${sleepers}`);
      // the idle sweep's look over every record (nothing is idle for an hour: it claims none)
      const s0 = performance.now();
      await q.db.kysely
        .selectFrom('agents')
        .select('id')
        .where('status', '=', 'running')
        .where('last_active_at', '<', new Date(Date.now() - 3_600_000))
        .execute();
      const sweepMs = performance.now() - s0;
      many = {
        agents: total,
        awake,
        suspended,
        watched,
        sleepersMs: round(sleepersMs, 0),
        platformRssStartMb: round(rssStart / 1024 / 1024, 1),
        platformRssMb: round(rssIdle / 1024 / 1024, 1),
        platformHeapStartMb: round(heapStart, 1),
        platformHeapMb: round(heapIdle, 1),
        agentsRssMb: round(sumKb((pid) => statusKb(pid, 'VmRSS')) / 1024, 1),
        agentsPssMb: round(sumKb(pssKb) / 1024, 1),
        watchdogPassMs: round(passMs, 0),
        sweepLookMs: round(sweepMs, 1),
      };
    } finally {
      await q.close();
      await shared.stop();
    }

    // 1. wake to first byte
    const p = await startPlatform(compiled, upstream.base, { AGENT_IDLE_SUSPEND_S: '1' });
    const wakes: number[] = [];
    const warm: number[] = [];
    let suspendedHolds = { processes: -1, cgroupMb: undefined as number | undefined };
    try {
      const agentId = await p.provision('Sleeper');
      await p.until(agentId, 'running');
      for (let i = 0; i < rounds; i++) {
        const processes = tree(p.statePid(agentId));
        await p.until(agentId, 'suspended', 30_000);
        while (processes.some(isAlive)) await sleep(10);
        if (i === 0) {
          let cgroupMb: number | undefined;
          try {
            cgroupMb = Number(readFileSync(`/sys/fs/cgroup/agent-platform/${agentId}/memory.current`, 'utf8')) / 1024 / 1024;
          } catch {
            cgroupMb = undefined; // its cgroup is removed with its processes
          }
          suspendedHolds = { processes: processes.filter(isAlive).length, cgroupMb };
        }
        await sleep(100); // settled: nothing of the suspend still running
        wakes.push(await firstByteMs(p.base, p.key, agentId));
        warm.push(await firstByteMs(p.base, p.key, agentId));
      }
    } finally {
      await p.close();
    }

    const results = {
      machine,
      wake: {
        rounds,
        p50Ms: round(quantile(wakes, 0.5), 1),
        p99Ms: round(quantile(wakes, 0.99), 1),
        maxMs: round(Math.max(...wakes), 1),
        awakeP50Ms: round(quantile(warm, 0.5), 1),
        samplesMs: wakes.map((x) => round(x, 1)),
      },
      suspended: suspendedHolds,
      many,
    };
    const w = results.wake;
    const markdown = [
      `Machine: ${machineLine(machine)}`,
      '',
      "The platform as `npm start` runs it (compiled, in this process; the local driver starts the compiled runtime in its sandbox), embedded PostgreSQL, the agents' model a local upstream answering at once.",
      '',
      `**Wake.** AGENT_IDLE_SUSPEND_S=1, one built-in agent, ${rounds} rounds: each waits until the agent reads \`suspended\` and none of its processes is left, then times a streamed chat completion through the agent proxy (\`sk_\` key) from the request to the first byte of the answer's body; then the same call to the awake agent.`,
      '',
      '| | p50 ms | p99 ms | max ms |',
      '|---|---:|---:|---:|',
      `| suspended agent: wake to first reply byte (goal p50 ≤ 300, p99 ≤ 1000) | **${w.p50Ms}** | **${w.p99Ms}** | ${w.maxMs} |`,
      `| the same agent awake | ${w.awakeP50Ms} | ${round(quantile(warm, 0.99), 1)} | ${round(Math.max(...warm), 1)} |`,
      '',
      `A suspended agent holds **${suspendedHolds.processes} processes**${suspendedHolds.cgroupMb !== undefined ? ` and ${round(suspendedHolds.cgroupMb, 1)} MB in its cgroup` : ' and no cgroup (removed with its processes)'}: its memory is none; its files stay on disk.`,
      '',
      `**Many agents.** ${many.agents} agents, every one provisioned through the API and started as a real process (compiled runtime, sandboxed): ${many.suspended} of them under a platform with AGENT_IDLE_SUSPEND_S=2, in waves of 25, each wave waited for until the idle sweep had suspended it (${round(many.sleepersMs / 1000, 0)} s in all; owners of up to 100 agents each); then that platform stopped and another started on the same database and DATA_DIR with AGENT_IDLE_SUSPEND_S=3600 (the sweep runs; nothing is idle that long) and provisioned the ${many.awake} that stay awake. Measured in that second platform.`,
      '',
      '| measure | value |',
      '|---|---:|',
      `| this process (the platform: both apps, workers, driver; PostgreSQL aside), resident, 10 s idle | ${many.platformRssMb} MB (${many.platformRssStartMb} MB before the agents; an upper bound: the process also holds the bench and its TypeScript loader) |`,
      `| the platform's V8 heap in use after a full collection | **${many.platformHeapMb} MB** (${many.platformHeapStartMb} MB before the agents) |`,
      `| the ${many.awake} awake agents' process trees, summed: VmRSS / PSS | ${many.agentsRssMb} MB / ${many.agentsPssMb} MB (${round(many.agentsPssMb / many.awake, 1)} MB PSS each) |`,
      `| a full watchdog pass: all ${many.watched} watched agents made due at once (the ${many.suspended} suspended ones' rows rest until they wake), until each was checked (poll 1 s) | **${many.watchdogPassMs} ms**, waking none |`,
      `| the idle sweep's look over all ${many.agents} records | ${many.sweepLookMs} ms |`,
    ].join('\n');
    return { name: 'idle', results, markdown };
  } finally {
    rmSync(out, { recursive: true, force: true });
    await stopProcess(upstream.proc);
  }
}
