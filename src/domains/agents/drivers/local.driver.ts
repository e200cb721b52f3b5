/**
 * The `local` driver (default): every agent is a child process on a free loopback port running
 * the built-in runtime (src/runtime/main.ts, with this process's Node) or, with
 * AGENT_RUNTIME=openclaw, the OpenClaw gateway installed by scripts/install-openclaw.sh.
 *
 * Layout per agent, under DATA_DIR/agents/<agentId>/ (the folder and everything but workspace/ and
 * home/ belong to the platform; the agent sees only those two, docs/security.md):
 *   driver-state.json   pid and its start time, uid, port, network, sha256 of the gateway token and of the launch
 *                       environment (no secret)
 *   logs/process.log    the process's own stdout/stderr (and pasta's), written by the platform
 *   netns-<random>      the agent's network namespace (a bind mount, agent-network.ts)
 *   openclaw.json       OpenClaw only: its configuration (OPENCLAW_CONFIG_PATH; read-only for the agent)
 *   workspace/          the agent's workspace: openclaw.json (the built-in runtime's configuration), logs/runtime.log
 *                       (JSON lines, read by logs()), logs/stats.json (counters, read by stats()), all written by the
 *                       agent and read by the platform only through confined descriptors (src/lib/confined-fs.ts)
 *   home/               HOME of the process (OpenClaw keeps its state in home/.openclaw, OPENCLAW_STATE_DIR)
 *
 * The platform never trusts what the agent can write: the launch environment comes from the spec
 * it was given (in memory, or loadSpec after a restart), never from /proc/<pid>/environ; a process
 * is "ours" by the pid and kernel start time in the state file; nothing in workspace/ or home/ is
 * created, opened or chowned through a path that could hold a planted link.
 *
 * Children are started detached (their own process group), so they outlive a crashed platform;
 * the next platform process re-adopts them through the state file (the pid is alive with the start
 * time recorded, the launch hash matches the spec and /healthz answers) when deploy() is called with
 * the same token and configuration, and otherwise replaces them. shutdown() stops what this instance
 * started or adopted. suspend() stops the process group with SIGSTOP (no CPU, survives a platform
 * restart) and resume() continues it.
 *
 * logs() and stats() read files and /proc without touching the process: local-observe.ts.
 *
 * Why this file is still long (~540 lines): launching, adopting, suspending and stopping share one
 * per-agent state (the state file, the owned child, the per-agent serial queue); split further,
 * each part would need that state handed around. The next seam is the launch (command, sandbox,
 * environment, waiting for the port), once a second runtime kind needs it.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from '../../../db/embedded.ts';
import type { Confinement } from '../../../lib/confined-fs.ts';
import { sha256Hex } from '../../../lib/crypto.ts';
import { probeHealthz } from '../container-health.ts';
import { agentEnvironment, PLATFORM_SECRET_ENV, planResources } from './agent-env.ts';
import {
  type AgentNetwork,
  type AgentNetworkMode,
  closeAgentNetworks,
  detectNetwork,
  inNetwork,
  openAgentNetwork,
  platformPorts,
  portAccepts,
} from './agent-network.ts';
import {
  type AgentDeploySpec,
  AgentNotDeployedError,
  type AgentStats,
  type AgentWorkspace,
  type ContainerStatus,
  type Deployment,
  type HostingDriver,
  HostingUnavailableError,
  type LogLine,
} from './driver.ts';
import { createStatsReader, readAgentLogs } from './local-observe.ts';
import { buildOpenClawConfig, OPENCLAW_ENV } from './openclaw-config.ts';
import {
  agentProcesses,
  isAlive,
  isStopped,
  processesOfUid,
  processTree,
  readComm,
  readProcStat,
  signalGroup,
  stopProcess,
} from './proc.ts';
import { detectSandbox, runInSandbox, type SandboxMode, type SandboxReport, sandboxArgv } from './sandbox.ts';

/** How long deploy() waits for a new local process to listen before leaving it to the health poll. */
const LISTEN_WAIT_MS = 20_000;
/** The same for OpenClaw, which needs ~10 s on an idle 2-core machine to answer /healthz (docs/benchmarks.md); §4.12's whole health wait is 60 s. */
const OPENCLAW_LIVE_WAIT_MS = 60_000;

export type LocalRuntimeKind = 'builtin' | 'openclaw';

export type LocalDriverOptions = {
  dataDir: string;
  runtime?: LocalRuntimeKind;
  /** added to every agent's environment (platform secrets are filtered out); tests switch AGENT_AUTH_LOOPBACK_EXEMPT off with it */
  extraEnv?: Record<string, string>;
  /** restart/resume of an agent without a live process or a spec in memory (after a platform restart) asks here */
  loadSpec?: (agentId: string) => Promise<AgentDeploySpec | undefined>;
  /** SIGTERM → SIGKILL grace period (default 5 s) */
  stopGraceMs?: number;
  /** timeout of the /healthz probe status() makes (default 2 s) */
  statusProbeTimeoutMs?: number;
  /** AGENT_SANDBOX: auto (bubblewrap when it works here, else a warning), bwrap (required), off */
  sandbox?: SandboxMode;
  /** says at creation which protections are active (one line each) */
  log?: (level: 'info' | 'warn', message: string) => void;
  /** tests: a script run instead of src/runtime/main.ts by the built-in runtime (its folder is bound read-only in the sandbox) */
  runtimeEntry?: string;
  /** AGENT_NETWORK: internet (default), platform, host (agent-network.ts) */
  network?: AgentNetworkMode;
};

type AgentState = {
  agentId: string;
  pid: number;
  /** the process's start time (/proc/<pid>/stat field 22): a pid reused by another process does not match */
  startTicks?: number;
  /** the agent's own OS user (sandboxed as root) */
  uid?: number;
  /** its network namespace and pasta, when it has its own */
  network?: AgentNetwork;
  port: number;
  url: string;
  runtime: LocalRuntimeKind;
  tokenHash: string;
  /** sha256 of the launch environment: deploy() adopts only an identical launch */
  launchHash: string;
  startedAt: string;
  suspended: boolean;
};

type RunOptions = { env: Record<string, string>; timeoutMs: number; maxBuffer: number };

type Owned = {
  env: Record<string, string>;
  uid?: number | undefined;
  /** the process this instance started or adopted (shutdown stops that one, not a successor another instance started) */
  pid?: number;
  child?: ChildProcess;
  exitCode?: number | null;
  stopping?: boolean;
};

const AGENT_ID = /^[A-Za-z0-9_-]{1,128}$/;
/**
 * The code this process runs: src/ (TypeScript, tests and `node src/main.ts`) or dist/ (its
 * compiled copy, `npm start`: scripts/build-server.ts). The built-in runtime is started from the
 * same tree, so an agent of a compiled platform runs compiled too (no type stripper resident).
 */
const CODE_DIR = fileURLToPath(new URL('../../../', import.meta.url)).replace(/\/$/, '');
const RUNTIME_MAIN = join(CODE_DIR, 'runtime', import.meta.url.endsWith('.ts') ? 'main.ts' : 'main.js');
/** The checkout (the code tree, node_modules/, package.json): what the built-in runtime needs to run. */
const REPO_ROOT = dirname(CODE_DIR);

/**
 * Gives the agent's user its workspace or home folder. The folder's own path is the platform's
 * (its parent belongs to the platform), so lchown on it is safe; its content is the agent's, and
 * a walk over it as root is not (audit N3/N14): only when the folder belongs to another uid (a new
 * agent user, the uids of migration 090 replacing derived ones) is the tree handed over, by
 * `chown -R -P` (never follows a link, descends with openat) in a child process while the agent is
 * stopped, so the event loop never waits on a tree the agent made large.
 */
async function handOver(dir: string, uid: number): Promise<void> {
  const st = lstatSync(dir);
  if (!st.isDirectory()) throw new Error(`${dir} is not a folder`);
  if (st.uid !== uid || st.gid !== uid) {
    await promisify(execFile)('chown', ['-R', '-P', `${uid}:${uid}`, dir], { timeout: 300_000, env: { PATH: '/usr/bin:/bin' } });
    lchownSync(dir, uid, uid);
  }
  chmodSync(dir, 0o700);
}

/** Bytes kept of process.log across launches (the older half is dropped at a launch once it is larger). */
const PROCESS_LOG_MAX = 8 * 1024 * 1024;

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

export function createLocalDriver(options: LocalDriverOptions): HostingDriver {
  const runtime = options.runtime ?? 'builtin';
  const root = join(options.dataDir, 'agents');
  const graceMs = options.stopGraceMs ?? 5_000;
  const probeMs = options.statusProbeTimeoutMs ?? 2_000;
  const owned = new Map<string, Owned>();
  const sandbox: SandboxReport = detectSandbox(options.sandbox ?? 'auto');
  for (const line of sandbox.lines) options.log?.(sandbox.active ? 'info' : 'warn', line);
  const network = detectNetwork(options.network ?? 'internet', sandbox.active);
  for (const line of network.lines) options.log?.(network.isolated ? 'info' : 'warn', line);
  const statsReader = createStatsReader();

  /**
   * Lifecycle calls on one agent run one after another (deploy, restart, suspend, resume, delete):
   * interleaved, two of them could each see "no live process" and each start one, leaving a process
   * that no state file names and so no delete stops. Different agents still run in parallel.
   */
  const queues = new Map<string, Promise<unknown>>();
  function serial<T>(agentId: string, fn: () => Promise<T>): Promise<T> {
    const run = (queues.get(agentId) ?? Promise.resolve()).then(fn, fn);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    queues.set(agentId, tail);
    void tail.then(() => {
      if (queues.get(agentId) === tail) queues.delete(agentId);
    });
    return run;
  }

  const dirs = (agentId: string) => {
    if (!AGENT_ID.test(agentId)) throw new Error(`invalid agent id for the local driver: ${JSON.stringify(agentId)}`);
    const base = join(root, agentId);
    return {
      base,
      workspace: join(base, 'workspace'),
      home: join(base, 'home'),
      /** platform-owned: the process's stdout/stderr */
      platformLogs: join(base, 'logs'),
      state: join(base, 'driver-state.json'),
      openclawConfig: join(base, 'openclaw.json'),
    };
  };

  const readState = (agentId: string): AgentState | undefined => {
    try {
      return JSON.parse(readFileSync(dirs(agentId).state, 'utf8')) as AgentState;
    } catch {
      return undefined;
    }
  };
  const writeState = (state: AgentState) => {
    const file = dirs(state.agentId).state;
    writeFileSync(`${file}.tmp`, JSON.stringify(state, null, 2), { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
  };

  /**
   * Alive and really the process the state file names: same pid and the same kernel start time (a
   * pid reused by an unrelated process after a reboot or a wrap does not match). Nothing the agent
   * can write (its environment, its command line) decides it.
   */
  const liveAgentPid = (state: AgentState | undefined): number | undefined => {
    if (!state || !isAlive(state.pid)) return undefined;
    if (state.startTicks === undefined || readProcStat(state.pid)?.startTicks !== state.startTicks) return undefined;
    return state.pid;
  };

  // PWD is left out: bwrap sets it (--chdir) in the sandboxed process's environment
  const launchHash = (env: Record<string, string>) =>
    sha256Hex(
      JSON.stringify(
        Object.entries(env)
          .filter(([k]) => k !== 'PWD')
          .sort(([a], [b]) => (a < b ? -1 : 1)),
      ),
    );

  function command(): { file: string; args: string[] } {
    if (runtime === 'builtin')
      return {
        file: realpathSync(process.execPath),
        args: ['--disable-warning=ExperimentalWarning', options.runtimeEntry ?? RUNTIME_MAIN],
      };
    const bin = join(options.dataDir, 'openclaw', 'node_modules', '.bin', 'openclaw');
    if (!existsSync(bin))
      throw new HostingUnavailableError(
        `AGENT_RUNTIME=openclaw but OpenClaw is not installed in ${dirname(dirname(dirname(bin)))} (run npm run runtime:openclaw)`,
      );
    // the package's bin is a Node script: run it with this Node (24), not whatever `node` is on PATH.
    // Port, bind and auth come from its configuration file (OPENCLAW_CONFIG_PATH) and the token from
    // OPENCLAW_GATEWAY_TOKEN: nothing secret on a command line other users can read in /proc
    return { file: realpathSync(process.execPath), args: [realpathSync(bin), 'gateway', 'run'] };
  }

  /** Read-only paths the runtime needs inside the sandbox: its code, and Node when it lives outside /usr. */
  function runtimePaths(): string[] {
    const paths: string[] = [];
    if (runtime === 'builtin') {
      const entry = options.runtimeEntry ?? RUNTIME_MAIN;
      paths.push(CODE_DIR, join(REPO_ROOT, 'node_modules'), join(REPO_ROOT, 'package.json'));
      if (options.runtimeEntry) paths.push(dirname(entry));
    } else {
      // the real path: the command runs realpath(bin), and DATA_DIR/openclaw may be a symbolic link
      paths.push(join(REPO_ROOT, 'node_modules'), realpathSync(join(options.dataDir, 'openclaw')));
    }
    const node = realpathSync(process.execPath);
    if (!node.startsWith('/usr/') && !paths.some((p) => node.startsWith(`${p}/`))) paths.push(dirname(dirname(node)));
    // a path inside another one is bound by its parent already
    return paths.filter((p, i) => existsSync(p) && !paths.some((q, j) => j !== i && p.startsWith(`${q}/`)));
  }

  /** The platform's own folders of an agent (never inside workspace/ or home/): 0700, the platform's. */
  function platformDirs(agentId: string) {
    const d = dirs(agentId);
    mkdirSync(d.platformLogs, { recursive: true, mode: 0o700 });
    chmodSync(d.base, 0o700);
    return d;
  }

  /** process.log of the platform's logs folder, opened for appending (the older half dropped once it is large). */
  function openProcessLog(agentId: string): number {
    const file = join(platformDirs(agentId).platformLogs, 'process.log');
    try {
      if (statSync(file).size > PROCESS_LOG_MAX) renameSync(file, `${file}.1`);
    } catch {
      /* no log yet */
    }
    return openSync(file, 'a', 0o600);
  }

  /**
   * Starts the process for `env` (inside the sandbox, and its own network namespace, when there is
   * one); writes the state file. bwrap gets its arguments (the environment included, secrets among
   * it) through a pipe (`--args`), not on a command line other users can read in /proc, and starts
   * the runtime from an empty environment plus exactly `env` (--clearenv).
   */
  async function launch(agentId: string, env: Record<string, string>, uid: number | undefined): Promise<AgentState> {
    const d = platformDirs(agentId);
    for (const dir of [d.workspace, d.home]) mkdirSync(dir, { recursive: true, mode: 0o700 });
    const { file, args } = command();
    const ro = runtimePaths();
    if (sandbox.separateUser && uid === undefined)
      throw new HostingUnavailableError(`agent ${agentId} has no OS user of its own (sandboxUid): deploy it again`);
    if (runtime === 'openclaw') {
      // OpenClaw's configuration (docs/agents.md "OpenClaw"): outside the workspace and state, read-only
      // in the sandbox, rewritten from the launch environment at every start (so a restart on a new port keeps them in step)
      const config = buildOpenClawConfig(JSON.parse(env.AGENT_CONFIG_JSON ?? '{}'), {
        plan: env.AGENT_PLAN ?? 'solo',
        workspace: d.workspace,
        port: Number(env.AGENT_PORT),
        bind: 'loopback',
        modelBaseUrl: env.AGENT_MODEL_BASE_URL,
        modelApiKey: Boolean(env.AGENT_MODEL_API_KEY),
        model: env.AGENT_MODEL,
      });
      // it may carry channel secrets from the user's configuration: readable by the agent only.
      // Sandboxed, the agent reads it through its group (root keeps ownership, so the agent can
      // neither change nor chmod it; the mount is read-only too); unsandboxed, it is the agent's own user
      const tmp = `${d.openclawConfig}.tmp`;
      rmSync(tmp, { force: true });
      writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
      if (uid !== undefined) {
        chownSync(tmp, 0, uid);
        chmodSync(tmp, 0o640);
      } else chmodSync(tmp, 0o600);
      renameSync(tmp, d.openclawConfig);
      ro.push(d.openclawConfig);
    }
    // the agent's own user owns its workspace and home, and nobody else may enter them
    if (uid !== undefined) for (const dir of [d.workspace, d.home]) await handOver(dir, uid);
    const out = openProcessLog(agentId);
    const port = Number(env.AGENT_PORT);
    let net: AgentNetwork | undefined;
    let child: ChildProcess;
    try {
      if (sandbox.active && network.isolated) {
        net = await openAgentNetwork(network, {
          base: d.base,
          agentPort: port,
          forward: platformPorts([env.AGENT_BACKEND_URL, env.AGENT_MODEL_BASE_URL]),
          logFd: out,
        });
      }
      if (sandbox.active) {
        const argv = sandboxArgv(sandbox, { ro, rw: [d.workspace, d.home], chdir: d.workspace, uid, file, args, env });
        const bwrapArgs = ['--args', '3', ...argv.command];
        const cmd = net ? inNetwork(network, net.nsFile, sandbox.bwrap!, bwrapArgs) : { file: sandbox.bwrap!, args: bwrapArgs };
        child = spawn(cmd.file, cmd.args, {
          cwd: '/',
          env: { PATH: '/usr/bin:/bin' },
          detached: true,
          stdio: ['ignore', out, out, 'pipe'],
        });
        const pipe = child.stdio[3] as NodeJS.WritableStream | null;
        pipe?.on('error', () => {});
        pipe?.end(Buffer.from(argv.options.map((a) => `${a}\0`).join('')));
      } else child = spawn(file, args, { cwd: d.workspace, env, detached: true, stdio: ['ignore', out, out] });
    } catch (err) {
      if (net) await closeAgentNetworks(network, d.base);
      throw err;
    } finally {
      closeSync(out);
    }
    if (!child.pid) {
      if (net) await closeAgentNetworks(network, d.base);
      throw new HostingUnavailableError(`could not start the agent runtime for ${agentId}`);
    }
    child.unref();
    const entry: Owned = { env, uid, child };
    owned.set(agentId, entry);
    child.on('exit', (code) => {
      if (owned.get(agentId) === entry) entry.exitCode = code;
    });
    child.on('error', () => {});
    // in the sandbox the runtime is a grandchild (bwrap, its PID-namespace init, then the runtime): the
    // state names the runtime itself, so a signal to it (stop, SIGKILL, SIGSTOP) reaches the agent
    const pid = sandbox.active ? await runtimePid(child.pid) : child.pid;
    entry.pid = pid;
    const state: AgentState = {
      agentId,
      pid,
      startTicks: readProcStat(pid)?.startTicks ?? 0,
      ...(uid !== undefined ? { uid } : {}),
      ...(net ? { network: net } : {}),
      port,
      url: `http://127.0.0.1:${env.AGENT_PORT}`,
      runtime,
      tokenHash: sha256Hex(env.AGENT_GATEWAY_TOKEN!),
      launchHash: launchHash(env),
      startedAt: new Date().toISOString(),
      suspended: false,
    };
    writeState(state);
    return state;
  }

  /** The first descendant of the bwrap process that is not bwrap (the runtime), or bwrap's pid when it is gone. */
  async function runtimePid(bwrapPid: number): Promise<number> {
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline && isAlive(bwrapPid)) {
      const inner = processTree(bwrapPid).find((p) => p.pid !== bwrapPid && readComm(p.pid) !== 'bwrap');
      if (inner) return inner.pid;
      await new Promise((r) => setTimeout(r, 10));
    }
    return bwrapPid;
  }

  /** The previous port when it is free again (a stable URL across restarts), else a new free one. */
  const pickPort = async (previous: AgentState | undefined) => (previous && (await portIsFree(previous.port)) ? previous.port : freePort());

  /**
   * Resolves once the freshly started process accepts TCP connections on its port (or has died,
   * or `LISTEN_WAIT_MS` passed). A loopback connect costs microseconds, so deploy() returns the
   * moment the gateway listens and the §4.12 health poll (every 2 s) succeeds on its first probe
   * instead of waiting out a whole interval (bench/provisioning.bench.ts).
   */
  async function waitUntilListening(state: AgentState): Promise<void> {
    // through pasta the host port accepts before the agent listens: ask the agent itself
    if (state.runtime === 'openclaw' || state.network) return waitUntilLive(state);
    const deadline = Date.now() + LISTEN_WAIT_MS;
    while (Date.now() < deadline && isAlive(state.pid)) {
      if (await portAccepts(state.port)) return;
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /**
   * OpenClaw opens its port seconds before its /healthz answers (it loads plugins, channels and its
   * state database in between): wait for /healthz itself, so the §4.12 poll's first probe succeeds
   * instead of the next one 2 s later.
   */
  async function waitUntilLive(state: AgentState): Promise<void> {
    const deadline = Date.now() + (state.runtime === 'openclaw' ? OPENCLAW_LIVE_WAIT_MS : LISTEN_WAIT_MS);
    while (Date.now() < deadline && isAlive(state.pid)) {
      if (await probeHealthz(state.url, 1_000)) return;
      await new Promise((r) => setTimeout(r, state.runtime === 'openclaw' ? 100 : 10));
    }
  }

  function envFor(spec: AgentDeploySpec, port: number): Record<string, string> {
    const d = dirs(spec.agentId);
    const url = `http://127.0.0.1:${port}`;
    const env = agentEnvironment(spec, { gatewayPort: port, gatewayUrl: url });
    const resources = planResources(spec.plan);
    return {
      ...env,
      ...Object.fromEntries(Object.entries(options.extraEnv ?? {}).filter(([k]) => !(k in env) && !PLATFORM_SECRET_ENV.has(k))),
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: d.home,
      AGENT_HOST: '127.0.0.1',
      AGENT_WORKSPACE: d.workspace,
      OPENCLAW_STATE_DIR: join(d.home, '.openclaw'),
      // shared between agents only without a sandbox (a shared writable cache would let one agent plant code in another)
      NODE_COMPILE_CACHE: sandbox.active ? join(d.home, '.cache', 'node-compile') : join(root, '.compile-cache'),
      // §4.7 memory by plan, applied to the V8 heap (a local process has no cgroup of its own)
      NODE_OPTIONS: `--max-old-space-size=${Math.floor(resources.memoryMb * 0.75)}`,
      ...(runtime === 'openclaw' ? { ...OPENCLAW_ENV, OPENCLAW_CONFIG_PATH: d.openclawConfig } : {}),
    };
  }

  /**
   * The launch we started it with (this process), or a fresh one from loadSpec (after a platform
   * restart). Never read back from the running process: /proc/<pid>/environ is memory the agent
   * can rewrite (audit N4), so it could choose what a restart runs with the platform's rights.
   */
  async function launchEnv(
    agentId: string,
    state: AgentState | undefined,
  ): Promise<{ env: Record<string, string>; uid?: number | undefined } | undefined> {
    const mine = owned.get(agentId);
    if (mine) return { env: { ...mine.env }, uid: mine.uid };
    const spec = await options.loadSpec?.(agentId);
    // the previous port: relaunch takes another only if it is still taken once the old process is gone
    return spec ? { env: envFor(spec, state?.port ?? (await freePort())), uid: spec.sandboxUid } : undefined;
  }

  async function stopAgent(agentId: string, state: AgentState | undefined) {
    const entry = owned.get(agentId);
    if (entry) entry.stopping = true;
    const pid = liveAgentPid(state);
    if (pid) await stopProcess(pid, graceMs);
    statsReader.forget(state?.pid ?? -1);
    // any other process of this agent (one started by another platform process on the same DATA_DIR,
    // or left by a crash between spawn and the state file): at most one process per agent lives.
    // With a user of its own, that user's processes are the agent's (the kernel says so); without
    // one the agent runs as the platform's user anyway, and its environment names it
    const uid = state?.uid ?? entry?.uid;
    const strays = uid !== undefined ? processesOfUid(uid) : agentProcesses(agentId, dirs(agentId).workspace);
    await Promise.all(strays.map((p) => stopProcess(p, graceMs)));
    await closeAgentNetworks(network, dirs(agentId).base);
  }

  async function relaunch(agentId: string): Promise<void> {
    const state = readState(agentId);
    const launchWith = await launchEnv(agentId, state);
    if (!launchWith) throw new AgentNotDeployedError(`agent ${agentId} has no running process to restart; deploy it again`);
    const { env } = launchWith;
    await stopAgent(agentId, state);
    // the old port is normally free again once the process is gone; take another if something grabbed it
    if (!(await portIsFree(Number(env.AGENT_PORT)))) {
      const port = await freePort();
      env.AGENT_PORT = String(port);
      env.OPENCLAW_GATEWAY_PORT = String(port);
      env.AGENT_GATEWAY_URL = `http://127.0.0.1:${port}`;
    }
    const started = await launch(agentId, env, launchWith.uid ?? state?.uid);
    // OpenClaw needs ~10 s to answer: a restart through the API must not outlast the web app's 10 s
    // backend call, so it returns once OpenClaw is started and the health probes see it come up
    if (started.runtime !== 'openclaw') await waitUntilListening(started);
  }

  async function status(agentId: string): Promise<{ status: ContainerStatus; url?: string }> {
    const state = readState(agentId);
    if (!state) return { status: 'not_found' };
    const pid = liveAgentPid(state);
    if (!pid) {
      const entry = owned.get(agentId);
      // a child of ours that we did not stop and that did not exit cleanly crashed (its exit event may still be on its way)
      const crashed = entry?.child !== undefined && !entry.stopping && entry.exitCode !== 0;
      return { status: crashed ? 'error' : state.suspended ? 'suspended' : 'stopped', url: state.url };
    }
    if (state.suspended || isStopped(pid)) return { status: 'suspended', url: state.url };
    return { status: (await probeHealthz(state.url, probeMs)) ? 'healthy' : 'running', url: state.url };
  }

  async function deployNow(spec: AgentDeploySpec): Promise<Deployment> {
    const d = dirs(spec.agentId);
    mkdirSync(d.workspace, { recursive: true });
    const previous = readState(spec.agentId);
    const pid = liveAgentPid(previous);
    if (previous && pid && !previous.suspended && previous.runtime === runtime && previous.tokenHash === sha256Hex(spec.gatewayToken)) {
      // same launch (token, configuration, model settings, port, user) as the state file recorded, and
      // answering: adopt it. The comparison is with the platform's own record, not the process's memory
      const env = envFor(spec, previous.port);
      if (previous.launchHash === launchHash(env) && previous.uid === spec.sandboxUid && (await probeHealthz(previous.url, probeMs))) {
        if (!owned.has(spec.agentId)) owned.set(spec.agentId, { env, uid: spec.sandboxUid, pid });
        return { externalId: `local-${pid}`, url: previous.url, status: 'healthy' };
      }
    }
    await stopAgent(spec.agentId, previous);
    const state = await launch(spec.agentId, envFor(spec, await pickPort(previous)), spec.sandboxUid);
    await waitUntilListening(state);
    return { externalId: `local-${state.pid}`, url: state.url, status: 'starting' };
  }

  async function suspendNow(agentId: string): Promise<void> {
    const state = readState(agentId);
    if (!state) throw new AgentNotDeployedError(`agent ${agentId} is not deployed`);
    const pid = liveAgentPid(state);
    if (pid) signalGroup(pid, 'SIGSTOP');
    writeState({ ...state, suspended: true });
  }

  async function resumeNow(agentId: string): Promise<void> {
    const state = readState(agentId);
    if (!state) throw new AgentNotDeployedError(`agent ${agentId} is not deployed`);
    const pid = liveAgentPid(state);
    if (pid) {
      signalGroup(pid, 'SIGCONT');
      writeState({ ...state, suspended: false });
      return;
    }
    await relaunch(agentId); // the process is gone (platform restart, crash): start it again
  }

  async function deleteNow(agentId: string): Promise<void> {
    const d = dirs(agentId);
    // stopped first, so nothing of the agent changes the tree while it is removed (rm never follows links)
    await stopAgent(agentId, readState(agentId));
    owned.delete(agentId);
    rmSync(d.base, { recursive: true, force: true });
  }

  /**
   * The workspace as the platform may open it: from its own folder, every component checked to
   * belong to the agent's user (its own uid sandboxed as root; the platform's user otherwise).
   */
  function workspaceOf(agentId: string, state: AgentState | undefined): Confinement {
    const root = dirs(agentId).workspace;
    if (sandbox.separateUser) return { root, owner: state?.uid ?? -1 }; // no state yet: nothing is opened
    return { root, owner: process.getuid?.() };
  }

  /** The file explorer's git as the agent (sandbox.ts runInSandbox), in its own network namespace while it runs. */
  function runAsAgent(agentId: string, state: AgentState | undefined, file: string, args: string[], o: RunOptions): Promise<string> {
    const uid = sandbox.separateUser ? state?.uid : undefined;
    if (sandbox.separateUser && uid === undefined)
      return Promise.reject(new HostingUnavailableError(`agent ${agentId} has not been started here yet`));
    const net = state?.network && network.nsenter && existsSync(state.network.nsFile) && liveAgentPid(state) ? state.network : undefined;
    return runInSandbox(
      sandbox,
      { dir: dirs(agentId).workspace, uid, netns: net ? { nsenter: network.nsenter!, file: net.nsFile } : undefined },
      file,
      args,
      o,
    );
  }

  return {
    kind: 'local',
    status,

    deploy(spec: AgentDeploySpec): Promise<Deployment> {
      dirs(spec.agentId); // validates the id before it names a queue
      return serial(spec.agentId, () => deployNow(spec));
    },

    restart(agentId: string): Promise<void> {
      dirs(agentId);
      return serial(agentId, () => relaunch(agentId));
    },

    /** Stops the process; restart() starts it again from the launch it remembers (the watchdog's repair). */
    stop(agentId: string): Promise<void> {
      dirs(agentId);
      return serial(agentId, () => stopAgent(agentId, readState(agentId)));
    },

    suspend(agentId: string): Promise<void> {
      dirs(agentId);
      return serial(agentId, () => suspendNow(agentId));
    },

    resume(agentId: string): Promise<void> {
      dirs(agentId);
      return serial(agentId, () => resumeNow(agentId));
    },

    delete(agentId: string): Promise<void> {
      dirs(agentId);
      return serial(agentId, () => deleteNow(agentId));
    },

    async logs(agentId: string, opts: { limit: number; level?: string }): Promise<LogLine[]> {
      const state = readState(agentId);
      const d = dirs(agentId);
      return readAgentLogs(
        { workspace: workspaceOf(agentId, state), processLog: join(d.platformLogs, 'process.log') },
        state?.runtime ?? runtime,
        state?.startedAt,
        opts,
      );
    },

    workspace(agentId: string): AgentWorkspace {
      const state = readState(agentId);
      const confinement = workspaceOf(agentId, state);
      return {
        dir: confinement.root,
        owner: confinement.owner,
        ...(sandbox.active ? { run: (file: string, args: string[], o: RunOptions) => runAsAgent(agentId, state, file, args, o) } : {}),
      };
    },

    async stats(agentId: string): Promise<AgentStats> {
      const state = readState(agentId);
      const { status: current } = await status(agentId);
      return statsReader.read(workspaceOf(agentId, state), state ? liveAgentPid(state) : undefined, current, state !== undefined);
    },

    /**
     * Stops what this instance started or adopted: an agent whose state file now names a process
     * another platform instance on the same DATA_DIR started since is left to that instance.
     */
    async shutdown(): Promise<void> {
      await Promise.all(
        [...owned.entries()].map(([agentId, entry]) =>
          serial(agentId, async () => {
            const state = readState(agentId);
            if (state && entry.pid !== undefined && state.pid !== entry.pid) return;
            await stopAgent(agentId, state);
          }).catch(() => {}),
        ),
      );
      owned.clear();
    },
  };
}
