/**
 * The `local` driver (default): every agent is a child process on a free loopback port running
 * the built-in runtime (src/runtime/main.ts, with this process's Node) or, with
 * AGENT_RUNTIME=openclaw, the OpenClaw gateway installed by scripts/install-openclaw.sh.
 *
 * Layout per agent, under DATA_DIR/agents/<agentId>/:
 *   driver-state.json   pid, port, sha256 of the gateway token and of the launch environment (no secret)
 *   openclaw.json       OpenClaw only: its configuration (OPENCLAW_CONFIG_PATH; read-only for the agent)
 *   workspace/          the agent's workspace: openclaw.json (the built-in runtime's configuration), logs/runtime.log
 *                       (JSON lines, read by logs()), logs/stats.json (counters, read by stats()),
 *                       logs/process.log (the process's own stdout/stderr)
 *   home/               HOME of the process (OpenClaw keeps its state in home/.openclaw, OPENCLAW_STATE_DIR)
 *
 * Children are started detached (their own process group), so they outlive a crashed platform;
 * the next platform process re-adopts them through the state file (the pid is alive, it is our
 * agent — /proc/<pid>/environ names it — and /healthz answers) when deploy() is called with the
 * same token and configuration, and otherwise replaces them. shutdown() stops what this instance
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
import { type ChildProcess, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { connect, createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../../db/embedded.ts';
import { sha256Hex } from '../../../lib/crypto.ts';
import { probeHealthz } from '../container-health.ts';
import { agentEnvironment, PLATFORM_SECRET_ENV, planResources } from './agent-env.ts';
import {
  type AgentDeploySpec,
  AgentNotDeployedError,
  type AgentStats,
  type ContainerStatus,
  type Deployment,
  type HostingDriver,
  HostingUnavailableError,
  type LogLine,
} from './driver.ts';
import { createStatsReader, readAgentLogs } from './local-observe.ts';
import { buildOpenClawConfig, OPENCLAW_ENV } from './openclaw-config.ts';
import { agentProcesses, isAlive, isStopped, processTree, readComm, readEnviron, signalGroup, stopProcess } from './proc.ts';
import { agentUid, detectSandbox, type SandboxMode, type SandboxReport, sandboxArgs } from './sandbox.ts';

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
};

type AgentState = {
  agentId: string;
  pid: number;
  port: number;
  url: string;
  runtime: LocalRuntimeKind;
  tokenHash: string;
  /** sha256 of the launch environment: deploy() adopts only an identical launch */
  launchHash: string;
  startedAt: string;
  suspended: boolean;
};

type Owned = { env: Record<string, string>; child?: ChildProcess; exitCode?: number | null; stopping?: boolean };

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

/** chown -R without following symbolic links. */
function chownTree(path: string, uid: number): void {
  const st = lstatSync(path);
  if (st.uid !== uid || st.gid !== uid) chownSync(path, uid, uid);
  if (!st.isDirectory()) return;
  for (const name of readdirSync(path)) chownTree(join(path, name), uid);
}

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
      logs: join(base, 'workspace', 'logs'),
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

  /** Alive and really this agent's runtime (a pid can be reused by an unrelated process after a reboot). */
  const liveAgentPid = (state: AgentState | undefined): number | undefined => {
    if (!state || !isAlive(state.pid)) return undefined;
    const entry = owned.get(state.agentId);
    // our own child: trusted without /proc/<pid>/environ (which shows the parent's until exec)
    if (entry?.child?.pid === state.pid && entry.exitCode === undefined) return state.pid;
    const env = readEnviron(state.pid);
    if (env && env.AGENT_ID !== state.agentId) return undefined;
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

  /** Starts the process for `env` (inside the sandbox when there is one); writes the state file. */
  async function launch(agentId: string, env: Record<string, string>): Promise<AgentState> {
    const d = dirs(agentId);
    mkdirSync(d.logs, { recursive: true });
    mkdirSync(d.home, { recursive: true });
    const { file, args } = command();
    const ro = runtimePaths();
    const uid = sandbox.separateUser ? agentUid(agentId) : undefined;
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
      writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
      if (uid !== undefined) {
        chownSync(tmp, 0, uid);
        chmodSync(tmp, 0o640);
      } else chmodSync(tmp, 0o600);
      renameSync(tmp, d.openclawConfig);
      ro.push(d.openclawConfig);
    }
    if (uid !== undefined) {
      // the agent's own user owns its workspace and home, and nobody else may enter them
      for (const dir of [d.workspace, d.home]) {
        chownTree(dir, uid);
        chmodSync(dir, 0o700);
      }
    }
    const out = openSync(join(d.logs, 'process.log'), 'a');
    let child: ChildProcess;
    try {
      child = sandbox.active
        ? spawn(sandbox.bwrap!, sandboxArgs(sandbox, { ro, rw: [d.workspace, d.home], chdir: d.workspace, uid, file, args }), {
            cwd: '/',
            env,
            detached: true,
            stdio: ['ignore', out, out],
          })
        : spawn(file, args, { cwd: d.workspace, env, detached: true, stdio: ['ignore', out, out] });
    } finally {
      closeSync(out);
    }
    if (!child.pid) throw new HostingUnavailableError(`could not start the agent runtime for ${agentId}`);
    child.unref();
    const entry: Owned = { env, child };
    owned.set(agentId, entry);
    child.on('exit', (code) => {
      if (owned.get(agentId) === entry) entry.exitCode = code;
    });
    child.on('error', () => {});
    // in the sandbox the runtime is a grandchild (bwrap, its PID-namespace init, then the runtime): the
    // state names the runtime itself, so a signal to it (stop, SIGKILL, SIGSTOP) reaches the agent
    const pid = sandbox.active ? await runtimePid(child.pid) : child.pid;
    const state: AgentState = {
      agentId,
      pid,
      port: Number(env.AGENT_PORT),
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
    if (state.runtime === 'openclaw') return waitUntilLive(state);
    const deadline = Date.now() + LISTEN_WAIT_MS;
    while (Date.now() < deadline && isAlive(state.pid)) {
      const open = await new Promise<boolean>((resolve) => {
        const socket = connect({ host: '127.0.0.1', port: state.port });
        socket.once('connect', () => {
          socket.destroy();
          resolve(true);
        });
        socket.once('error', () => resolve(false));
      });
      if (open) return;
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /**
   * OpenClaw opens its port seconds before its /healthz answers (it loads plugins, channels and its
   * state database in between): wait for /healthz itself, so the §4.12 poll's first probe succeeds
   * instead of the next one 2 s later.
   */
  async function waitUntilLive(state: AgentState): Promise<void> {
    const deadline = Date.now() + OPENCLAW_LIVE_WAIT_MS;
    while (Date.now() < deadline && isAlive(state.pid)) {
      if (await probeHealthz(state.url, 1_000)) return;
      await new Promise((r) => setTimeout(r, 100));
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

  /** Launch environment of a live process, or the one we started it with, or a fresh one from loadSpec. */
  async function launchEnv(agentId: string, state: AgentState | undefined): Promise<Record<string, string> | undefined> {
    const mine = owned.get(agentId)?.env;
    if (mine) return mine;
    const pid = liveAgentPid(state);
    const fromProc = pid ? readEnviron(pid) : undefined;
    if (fromProc?.AGENT_GATEWAY_TOKEN) return fromProc;
    const spec = await options.loadSpec?.(agentId);
    return spec ? envFor(spec, await pickPort(state)) : undefined;
  }

  async function stopAgent(agentId: string, state: AgentState | undefined) {
    const entry = owned.get(agentId);
    if (entry) entry.stopping = true;
    const pid = liveAgentPid(state);
    if (pid) await stopProcess(pid, graceMs);
    statsReader.forget(state?.pid ?? -1);
    // any other process of this agent (one started by another platform process on the same DATA_DIR,
    // or left by a crash between spawn and the state file): at most one process per agent lives
    const strays = agentProcesses(agentId, dirs(agentId).workspace);
    await Promise.all(strays.map((p) => stopProcess(p, graceMs)));
  }

  async function relaunch(agentId: string): Promise<void> {
    const state = readState(agentId);
    const env = await launchEnv(agentId, state);
    if (!env) throw new AgentNotDeployedError(`agent ${agentId} has no running process to restart; deploy it again`);
    await stopAgent(agentId, state);
    // the old port is normally free again once the process is gone; take another if something grabbed it
    if (!(await portIsFree(Number(env.AGENT_PORT)))) {
      const port = await freePort();
      env.AGENT_PORT = String(port);
      env.OPENCLAW_GATEWAY_PORT = String(port);
      env.AGENT_GATEWAY_URL = `http://127.0.0.1:${port}`;
    }
    const started = await launch(agentId, env);
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
      const liveEnv = readEnviron(pid);
      // same launch (token, configuration, model settings, port) and answering: adopt it
      if (liveEnv && launchHash(liveEnv) === launchHash(envFor(spec, previous.port)) && (await probeHealthz(previous.url, probeMs))) {
        if (!owned.has(spec.agentId)) owned.set(spec.agentId, { env: liveEnv });
        return { externalId: `local-${pid}`, url: previous.url, status: 'healthy' };
      }
    }
    await stopAgent(spec.agentId, previous);
    const state = await launch(spec.agentId, envFor(spec, await pickPort(previous)));
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
    await stopAgent(agentId, readState(agentId));
    owned.delete(agentId);
    rmSync(d.base, { recursive: true, force: true });
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
      return readAgentLogs(dirs(agentId).logs, state?.runtime ?? runtime, state?.startedAt, opts);
    },

    workspaceDir(agentId: string): string {
      return dirs(agentId).workspace;
    },

    async stats(agentId: string): Promise<AgentStats> {
      const state = readState(agentId);
      const { status: current } = await status(agentId);
      return statsReader.read(dirs(agentId).logs, state ? liveAgentPid(state) : undefined, current, state !== undefined);
    },

    async shutdown(): Promise<void> {
      await Promise.all([...owned.keys()].map((agentId) => serial(agentId, () => stopAgent(agentId, readState(agentId))).catch(() => {})));
      owned.clear();
    },
  };
}
