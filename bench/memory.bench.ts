/**
 * Idle resident memory (VmRSS from /proc) of the platform and of one built-in-runtime agent.
 *
 * Platform: both apps, the workers and the drivers in one Node process, PostgreSQL excluded:
 * started with a fresh DATA_DIR (embedded PostgreSQL, which runs as its own processes and is not
 * counted), left idle after both apps answer. Measured as `npm start` runs it (the sources
 * compiled by scripts/build-server.ts, `node dist/main.js`; here a scratch copy beside dist/) and
 * straight from the sources (`node src/main.ts`, Node stripping types). Goal: ≤ 150 MB for the first.
 *
 * Agent: one agent started through the platform's local driver (sandbox, own uid and network
 * namespace where this machine allows them, as the platform runs it), from the compiled tree (what
 * `npm start` launches) and from the sources, its model a local OpenAI-compatible server. The
 * whole process tree is counted: the runtime's process group (bwrap, bwrap as the namespace's
 * init, node) and the pasta serving its network. Read idle after /healthz answers, idle after one
 * HTTP and one WebSocket chat, and idle after a burst of chats. Goal: ≤ 45 MB idle.
 * Settings: BENCH_IDLE_S (seconds idle before each reading, default 10), BENCH_AGENT_CHATS (the
 * burst, default 2000 requests at concurrency 4), BENCH_DENSITY_AGENTS (agents idle at once for the per-agent
 * PSS and cgroup charge, default 10).
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import WebSocket from 'ws';
import { buildServer } from '../scripts/build-server.ts';
import { freePort } from '../src/db/embedded.ts';
import type { HostingDriver } from '../src/domains/agents/drivers/driver.contract.ts';
import { readComm, readProcStat } from '../src/domains/agents/drivers/local/containment/proc.service.ts';
import { FIRST_AGENT_UID } from '../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import type { createLocalDriver as CreateLocalDriver } from '../src/domains/agents/drivers/local/local.driver.ts';
import { describeMachine, machineLine } from './lib/machine.ts';
import { type BenchOutput, round } from './lib/report.ts';

const ROOT = join(import.meta.dirname, '..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A field of /proc/<pid>/status in MB (VmRSS: what `ps` shows; RssAnon: the part no other process shares). */
const statusMb = (pid: number, field: 'VmRSS' | 'RssAnon') => {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
};
const rssMb = (pid: number) => statusMb(pid, 'VmRSS');
/** Proportional set size in MB (smaps_rollup): resident pages, each shared page divided among the processes mapping it. */
const pssMb = (pid: number) => {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
};
/**
 * What the kernel charges to the agent's own control group (agent-cgroup.service.ts), MB: its anonymous
 * memory, the page cache it brought in and the kernel's memory for it (sockets, page tables),
 * not the pages of Node already resident for the platform. Undefined without per-agent groups.
 */
const cgroupMb = (agentId: string): number | undefined => {
  for (const file of [
    `/sys/fs/cgroup/agent-platform/${agentId}/memory.current`,
    `/sys/fs/cgroup/memory/agent-platform/${agentId}/memory.usage_in_bytes`,
  ]) {
    try {
      return Number(readFileSync(file, 'utf8')) / 1024 / 1024;
    } catch {
      /* the other version */
    }
  }
  return undefined;
};

async function measure(entry: string, idleS: number): Promise<{ atStart: number; idle: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'memory-bench-'));
  const [web, backend] = [await freePort(), await freePort()];
  const child = spawn(join(ROOT, 'node_modules', '.bin', 'node'), [entry], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATA_DIR: dir,
      WEB_PORT: String(web),
      BACKEND_PORT: String(backend),
      PUBLIC_URL: `http://127.0.0.1:${web}`,
      BACKEND_URL: `http://127.0.0.1:${backend}`,
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'json',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  try {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const ok = await Promise.all([fetch(`http://127.0.0.1:${web}/api/health`), fetch(`http://127.0.0.1:${backend}/health`)]).then(
        (r) => r.every((x) => x.ok),
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`platform did not start: ${stderr.slice(-500)}`);
      await sleep(250);
    }
    const atStart = rssMb(child.pid!);
    await sleep(idleS * 1000);
    const idle = rssMb(child.pid!);
    return { atStart, idle };
  } finally {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

type TreeReading = {
  totalMb: number;
  anonMb: number;
  pssMb: number;
  /** charged to the agent's cgroup, when it has one */
  cgroupMb?: number;
  processes: { name: string; rssMb: number; anonMb: number; pssMb: number }[];
};

/**
 * Every process of the agent: the runtime's process group (the driver starts it as a group
 * leader: bwrap, or the runtime itself without a sandbox) and the pasta whose command line names
 * the agent's network namespace.
 */
function agentTree(state: { agentId: string; pid: number; network?: { nsFile: string } }): TreeReading {
  const group = readProcStat(state.pid)?.pgrp;
  const processes: TreeReading['processes'] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    let argv: string[] = [];
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // gone
    }
    const mine =
      (group !== undefined && readProcStat(pid)?.pgrp === group) ||
      (state.network !== undefined && /^(pasta|passt)/.test(readComm(pid) ?? '') && argv.includes(state.network.nsFile));
    if (mine)
      processes.push({
        name: (argv[0] ?? '').split('/').at(-1)!,
        rssMb: round(rssMb(pid), 1),
        anonMb: round(statusMb(pid, 'RssAnon'), 1),
        pssMb: round(pssMb(pid), 1),
      });
  }
  const sum = (k: 'rssMb' | 'anonMb' | 'pssMb') =>
    round(
      processes.reduce((s, p) => s + p[k], 0),
      1,
    );
  const charged = cgroupMb(state.agentId);
  return {
    totalMb: sum('rssMb'),
    anonMb: sum('anonMb'),
    pssMb: sum('pssMb'),
    ...(charged !== undefined ? { cgroupMb: round(charged, 1) } : {}),
    processes,
  };
}

/** An OpenAI-compatible model answering every chat at once, in this process. */
async function fakeModel(): Promise<{ url: string; close: () => void }> {
  const answer = JSON.stringify({ object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' } }] });
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(answer));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, close: () => server.close() };
}

/**
 * Deploys one bench agent (the model's server also takes its chat-turn callbacks: any POST answers
 * 200, as the backend would) and waits until it answers /healthz. `uid` is used as root only.
 */
async function deployAndWait(
  driver: HostingDriver,
  o: { agentId: string; token: string; modelUrl: string; uid: number },
): Promise<{ url: string }> {
  const d = await driver.deploy({
    agentId: o.agentId,
    userId: 'memory-bench',
    plan: 'label',
    gatewayToken: o.token,
    platformApiKey: 'apk_memory_bench',
    backendUrl: new URL(o.modelUrl).origin,
    config: {},
    env: { AGENT_MODEL_BASE_URL: o.modelUrl, AGENT_MODEL: 'bench-model' },
    ...(process.getuid?.() === 0 ? { sandboxUid: o.uid } : {}),
  });
  const deadline = Date.now() + 30_000;
  while (
    !(await fetch(`${d.url}/healthz`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (Date.now() > deadline) throw new Error(`agent ${o.agentId} did not answer /healthz`);
    await sleep(20);
  }
  return d;
}

type AgentMemory = { idle: TreeReading; afterFirstChats: TreeReading; afterBurst: TreeReading; burstRps: number };

/** One agent through the local driver of the tree at `codeDir` (src/, or a compiled copy). */
async function measureAgent(codeDir: string, idleS: number, chats: number): Promise<AgentMemory> {
  const ext = codeDir.endsWith('src') ? 'ts' : 'js';
  const { createLocalDriver } = (await import(
    pathToFileURL(join(codeDir, 'domains', 'agents', 'drivers', 'local', `local.driver.${ext}`)).href
  )) as {
    createLocalDriver: typeof CreateLocalDriver;
  };
  const dataDir = mkdtempSync(join(tmpdir(), 'memory-agent-'));
  chmodSync(dataDir, 0o755); // a sandboxed agent's user must reach its folders
  const model = await fakeModel();
  const driver = createLocalDriver({ dataDir, runtime: 'builtin' });
  const token = 'm'.repeat(48);
  const agentId = 'memory-agent';
  try {
    // as root the agent gets a user of its own, as the platform gives it (far above the ids the database hands out)
    const d = await deployAndWait(driver, { agentId, token, modelUrl: model.url, uid: FIRST_AGENT_UID + 9_990_000 });
    const state = JSON.parse(readFileSync(join(dataDir, 'agents', agentId, 'driver-state.json'), 'utf8'));
    await sleep(idleS * 1000);
    const idle = agentTree(state);

    const chat = () =>
      fetch(`${d.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hello' }] }),
      }).then(async (r) => {
        if (!r.ok) throw new Error(`chat answered ${r.status}: ${await r.text()}`);
        await r.arrayBuffer();
      });
    await chat();
    const ws = new WebSocket(`${d.url.replace('http', 'ws')}/ws`, { headers: { authorization: `Bearer ${token}` } });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const frame = new Promise<string>((r) => ws.once('message', (m) => r(String(m))));
    ws.send(JSON.stringify({ type: 'chat', content: 'hello' }));
    if (!(await frame).includes('"reply"')) throw new Error('the WebSocket chat did not reply');
    ws.close();
    await sleep(idleS * 1000);
    const afterFirstChats = agentTree(state);

    const started = performance.now();
    let sent = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (sent < chats) {
          sent++;
          await chat();
        }
      }),
    );
    const burstRps = chats / ((performance.now() - started) / 1000);
    await sleep(idleS * 1000);
    return { idle, afterFirstChats, afterBurst: agentTree(state), burstRps: round(burstRps, 0) };
  } finally {
    await driver.shutdown();
    model.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

type Density = { agents: number; rssMb: number; pssMb: number; anonMb: number; cgroupMb?: number };

/**
 * `n` idle agents at once through one driver of the compiled tree: per agent, the mean of each
 * measure. (The machine's MemAvailable before and after moved by more than the agents' cost while
 * other work ran on this shared machine, so it is not reported.)
 */
async function measureDensity(codeDir: string, n: number, idleS: number): Promise<Density> {
  const { createLocalDriver } = (await import(
    pathToFileURL(join(codeDir, 'domains', 'agents', 'drivers', 'local', 'local.driver.js')).href
  )) as {
    createLocalDriver: typeof CreateLocalDriver;
  };
  const dataDir = mkdtempSync(join(tmpdir(), 'memory-density-'));
  chmodSync(dataDir, 0o755);
  const model = await fakeModel();
  const driver = createLocalDriver({ dataDir, runtime: 'builtin' });
  try {
    await sleep(2_000);
    const ids = Array.from({ length: n }, (_, i) => `density-${i}`);
    for (const [i, agentId] of ids.entries()) {
      await deployAndWait(driver, { agentId, token: 'd'.repeat(48), modelUrl: model.url, uid: FIRST_AGENT_UID + 9_990_100 + i });
    }
    await sleep(idleS * 1000);
    const trees = ids.map((agentId) => agentTree(JSON.parse(readFileSync(join(dataDir, 'agents', agentId, 'driver-state.json'), 'utf8'))));
    const mean = (k: 'totalMb' | 'pssMb' | 'anonMb' | 'cgroupMb') => round(trees.reduce((s, t) => s + (t[k] ?? 0), 0) / n, 1);
    return {
      agents: n,
      rssMb: mean('totalMb'),
      pssMb: mean('pssMb'),
      anonMb: mean('anonMb'),
      ...(trees.every((t) => t.cgroupMb !== undefined) ? { cgroupMb: mean('cgroupMb') } : {}),
    };
  } finally {
    await driver.shutdown();
    model.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const describeTree = (t: TreeReading) => t.processes.map((p) => `${p.name} ${p.rssMb}`).join(' + ');

export async function run(): Promise<BenchOutput> {
  const machine = describeMachine();
  const idleS = Number(process.env.BENCH_IDLE_S ?? 10);
  const chats = Number(process.env.BENCH_AGENT_CHATS ?? 2000);
  const out = join(ROOT, `.dist-bench-${process.pid}`);
  let compiled: { atStart: number; idle: number };
  let agentCompiled: AgentMemory;
  let density: Density;
  const densityN = Number(process.env.BENCH_DENSITY_AGENTS ?? 10);
  try {
    buildServer(out);
    compiled = await measure(relative(ROOT, join(out, 'main.js')), idleS);
    agentCompiled = await measureAgent(out, idleS, chats);
    density = await measureDensity(out, densityN, idleS);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
  const source = await measure('src/main.ts', idleS);
  const agentSource = await measureAgent(join(ROOT, 'src'), idleS, chats);
  const bare = spawn(process.execPath, ['-e', 'setInterval(()=>{},1000)'], { stdio: 'ignore' });
  await sleep(2_000);
  const bareNodeMb = round(rssMb(bare.pid!), 1);
  bare.kill('SIGKILL');

  const results = {
    machine,
    idleS,
    rssAtReadyMb: round(compiled.atStart, 1),
    rssIdleMb: round(compiled.idle, 1),
    fromSourceRssIdleMb: round(source.idle, 1),
    goalMb: 150,
    agent: { compiled: agentCompiled, fromSource: agentSource, density, burstChats: chats, bareNodeMb, goalMb: 45 },
  };
  const row = (label: string, a: AgentMemory) =>
    `| ${label} | **${a.idle.totalMb}** (${describeTree(a.idle)}) | ${a.idle.anonMb} | ${a.idle.pssMb} | ${a.idle.cgroupMb ?? '–'} | ${a.afterFirstChats.totalMb} | ${a.afterBurst.totalMb} (${a.burstRps} req/s) |`;
  const markdown = [
    `Machine: ${machineLine(machine)}`,
    '',
    'Both apps, workers and the local driver in one process (embedded PostgreSQL in its own processes, not counted), fresh DATA_DIR; ' +
      `VmRSS of the Node process when both apps first answer, and after ${idleS} s idle.`,
    '',
    `- as \`npm start\` runs it (compiled, \`node dist/main.js\`): **${round(compiled.idle, 1)} MB** idle (${round(compiled.atStart, 1)} MB when ready); goal ≤ 150 MB`,
    `- from the sources (\`node src/main.ts\`, Node stripping types): ${round(source.idle, 1)} MB idle`,
    '',
    "What keeps it down: `npm start` runs the sources compiled to JavaScript (scripts/build-server.ts), so Node's type stripper " +
      '(a WebAssembly swc, ~18 MB resident for the life of the process) is never loaded; viem (~27 MB on top of the other ' +
      'dependencies: SIWE, receipts, MPP, wallets, the Underground bus) is imported on first use (src/lib/viem.ts); so are the `stripe` SDK, `ioredis` ' +
      "(REDIS_URL) and the common-password dictionaries (first registration); `undici` (~30 MB, as it brings Node's own bundled undici along: " +
      "the first model call, agent proxy request or webhook delivery; src/lib/undici.ts), `jose` (security event tokens, the custodial wallet's JWTs), " +
      'the messaging libraries (grammY, @discordjs/*: the first channel token checked or bot connected) and `@upstash/redis` (the first hosting status write); ' +
      'and only when their setting chooses them: ' +
      '`@kubernetes/client-node` (~90 MB, HOSTING_DRIVER=kubernetes), `dockerode` (~30 MB, docker), `prom-client` (~20 MB, METRICS_TOKEN), ' +
      '`nodemailer` (~20 MB, SMTP_URL) and the x402 payer packages (~35 MB, X402_PAYER_PRIVATE_KEY). Before they were deferred the idle process read 165–171 MB, and 172 MB on 2026-11-28 before undici, jose and the messaging libraries were.',
    '',
    `One built-in-runtime agent started by the local driver, its whole process tree (VmRSS, MB, each reading after ${idleS} s idle): ` +
      `when it first answers /healthz; after one HTTP and one WebSocket chat; after a burst of ${chats} chat requests (concurrency 4). ` +
      `A bare Node process (\`setInterval\` only), same Node: ${bareNodeMb} MB. Goal ≤ 45 MB idle. "Anonymous" (RssAnon) is the ` +
      "part no other process shares; the rest is mostly the pages of Node's own executable, shared with every other agent and the platform.",
    '',
    '| runtime | idle (processes) | of it anonymous | PSS | charged to its cgroup | after first chats | after the burst |',
    '|---|---|---:|---:|---:|---:|---:|',
    row('compiled (as `npm start` launches it)', agentCompiled),
    row('from the sources (tests, `npm run start:src`)', agentSource),
    '',
    `${density.agents} idle agents at once (compiled), per agent (MB): VmRSS ${density.rssMb}, PSS ${density.pssMb} (shared pages divided among the processes mapping them), ` +
      `anonymous ${density.anonMb}${density.cgroupMb !== undefined ? `, charged to its cgroup ${density.cgroupMb}` : ''}.`,
  ].join('\n');
  return { name: 'memory', results, markdown };
}
