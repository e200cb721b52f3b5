/**
 * Starting an agent's process for the local driver: the command (the built-in runtime or
 * OpenClaw), the sandbox and network namespace around it, its launch environment, and the wait
 * until it listens. local.driver.ts decides when; this file knows how.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LIMITS } from '../../../../config/limits.ts';
import { sha256Hex } from '../../../../lib/crypto.ts';
import { probeHealthz } from '../../agent-client/health-probe.client.ts';
import { agentEnvironment, PLATFORM_SECRET_ENV, planResources } from '../agent-env.rules.ts';
import { type AgentDeploySpec, HostingUnavailableError, type UnitExit } from '../driver.contract.ts';
import { buildOpenClawConfig, OPENCLAW_ENV } from '../openclaw-config.rules.ts';
import { type AgentCgroups, enter } from './containment/agent-cgroup.service.ts';
import { diskQuotaBytes, withFileSizeLimit } from './containment/agent-disk.service.ts';
import {
  bindGatewaySocket,
  LOOPBACK_DIR,
  type LoopbackBridges,
  loopbackOnly,
  socketPathsFit,
} from './containment/agent-loopback.service.ts';
import {
  type AgentNetwork,
  closeAgentNetworks,
  inNetwork,
  type NetworkReport,
  openAgentNetwork,
  platformPorts,
  portAccepts,
} from './containment/agent-network.service.ts';
import { isAlive, processTree, readComm, readProcStat } from './containment/proc.service.ts';
import { type SandboxReport, sandboxArgv } from './containment/sandbox.service.ts';
import {
  type AgentState,
  handOver,
  type LocalDriverOptions,
  type LocalRuntimeKind,
  type Owned,
  type StateStore,
} from './local-state.service.ts';

/** How long deploy() waits for a new local process to listen before leaving it to the health poll. */
const LISTEN_WAIT_MS = 20_000;
/** The same for OpenClaw, which needs ~10 s on an idle 2-core machine to answer /healthz (docs/benchmarks.md); §4.12's whole health wait is 60 s. */
const OPENCLAW_LIVE_WAIT_MS = 60_000;
/**
 * The code this process runs: src/ (TypeScript, tests and `node src/main.ts`) or dist/ (its
 * compiled copy, `npm start`: scripts/build-server.ts). The built-in runtime is started from the
 * same tree, so an agent of a compiled platform runs compiled too (no type stripper resident).
 */
const CODE_DIR = fileURLToPath(new URL('../../../../', import.meta.url)).replace(/\/$/, '');
const RUNTIME_MAIN = join(CODE_DIR, 'runtime', import.meta.url.endsWith('.ts') ? 'main.ts' : 'main.js');
/** The checkout (the code tree, node_modules/, package.json): what the built-in runtime needs to run. */
const REPO_ROOT = dirname(CODE_DIR);

export type LauncherContext = {
  options: LocalDriverOptions;
  runtime: LocalRuntimeKind;
  /** DATA_DIR/agents */
  root: string;
  sandbox: SandboxReport;
  network: NetworkReport;
  store: StateStore;
  /** the processes this driver instance started or adopted: launch() records its child here */
  owned: Map<string, Owned>;
  /** §4.7 memory and CPU per plan (agent-cgroup.service.ts); undefined where the machine has no usable controllers */
  cgroups?: AgentCgroups | undefined;
  /** the built-in runtime's forwarded platform ports (agent-loopback.service.ts) */
  bridges: LoopbackBridges;
  /** util-linux prlimit, which starts the agent with RLIMIT_FSIZE = its disk quota (agent-disk.service.ts); undefined: not found */
  prlimit: string | undefined;
  /** a child ended without the driver stopping it (local.driver.ts tells the platform: watchExits) */
  onExit?: (agentId: string, exit: UnitExit) => void;
};

/** The descriptor the built-in runtime's gateway socket has in the agent (0–2 stdio, 3 bwrap's arguments). */
const GATEWAY_FD = 4;

/** Points a launch environment at another gateway port (the one it had was taken). */
export function movePort(env: Record<string, string>, port: number): void {
  env.AGENT_PORT = String(port);
  env.OPENCLAW_GATEWAY_PORT = String(port);
  env.AGENT_GATEWAY_URL = `http://127.0.0.1:${port}`;
}

export function createLauncher(ctx: LauncherContext) {
  const { options, runtime, root, sandbox, network, store, owned, cgroups, bridges, prlimit } = ctx;
  const { dirs, platformDirs, openProcessLog, writeState } = store;

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
    if (runtime === 'builtin') {
      const entry = options.runtimeEntry ?? RUNTIME_MAIN;
      // V8 for an idle, I/O-bound process (docs/benchmarks.md "Memory of one built-in-runtime agent"):
      // a 1 MB young generation, and no JIT for compiled JavaScript (a .ts entry needs WebAssembly, which
      // --jitless turns off, for Node's type stripper); both keep a busy agent from growing by tens of MB
      const v8 = ['--max-semi-space-size=1', ...(entry.endsWith('.js') ? ['--jitless'] : [])];
      return { file: realpathSync(process.execPath), args: ['--disable-warning=ExperimentalWarning', ...v8, entry] };
    }
    const bin = join(options.dataDir, 'openclaw', 'node_modules', '.bin', 'openclaw');
    if (!existsSync(bin))
      throw new HostingUnavailableError(
        `AGENT_RUNTIME=openclaw but OpenClaw is not installed in ${dirname(dirname(dirname(bin)))} (run npm run runtime:openclaw)`,
      );
    // the package's bin is a Node script: run it with this Node (24), not whatever `node` is on PATH.
    // Port, bind and auth come from its configuration file (OPENCLAW_CONFIG_PATH) and the token from
    // OPENCLAW_GATEWAY_TOKEN: nothing secret on a command line other users can read in /proc.
    // The flag is the one OpenClaw's launcher otherwise re-executes itself to add (OPENCLAW_ENV)
    return {
      file: realpathSync(process.execPath),
      args: ['--disable-warning=ExperimentalWarning', realpathSync(bin), 'gateway', 'run'],
    };
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
    // the built-in runtime in the sandbox: loopback only, its sockets from the platform (agent-loopback.service.ts);
    // else pasta's namespace where it exists; else the host's network
    const fits = socketPathsFit(d.base);
    const bridged = sandbox.active && network.bridge && fits ? loopbackOnly([env.AGENT_BACKEND_URL, env.AGENT_MODEL_BASE_URL]) : undefined;
    const loopbackDir = join(d.base, LOOPBACK_DIR);
    if (sandbox.active && network.bridge && !bridged && !network.pasta)
      options.log?.(
        'warn',
        `agent ${agentId} shares the host's network: ${fits ? 'its platform URLs are not on this machine' : 'DATA_DIR is too long a path for its sockets'} and pasta is not available`,
      );
    let gateway: { fd: number; close(): void } | undefined;
    if (bridged) {
      const port = await bridges.serve(d.base, { gateway: Number(env.AGENT_PORT), platform: bridged }, true);
      // the port was taken since it was picked: the kernel's pick instead (the state file records it)
      if (port !== Number(env.AGENT_PORT)) movePort(env, port);
      try {
        gateway = await bindGatewaySocket(d.base);
      } catch (err) {
        await bridges.close(d.base);
        throw err;
      }
    }
    const out = await openProcessLog(agentId, options.processLogMaxBytes ?? LIMITS.processLogMaxBytes);
    const port = Number(env.AGENT_PORT);
    // docs/agents.md "Disk": no file of the agent's (process.log included) grows past its quota
    const quotaBytes = diskQuotaBytes(env.AGENT_PLAN, options.diskQuotaMb);
    let net: AgentNetwork | undefined;
    let child: ChildProcess;
    try {
      if (sandbox.active && !bridged && network.pasta) {
        net = await openAgentNetwork(network, {
          base: d.base,
          agentPort: port,
          forward: platformPorts([env.AGENT_BACKEND_URL, env.AGENT_MODEL_BASE_URL]),
          logFd: out,
        });
      }
      if (sandbox.active) {
        // nothing may await from here to the spawn: the gateway socket is in this process until then
        const argv = sandboxArgv(sandbox, {
          ro: bridged ? [...ro, loopbackDir] : ro,
          rw: [d.workspace, d.home],
          chdir: d.workspace,
          uid,
          file,
          args,
          env: bridged ? { ...env, AGENT_LISTEN_FD: String(GATEWAY_FD), AGENT_LOOPBACK_SOCKETS: loopbackDir } : env,
          unshareNet: Boolean(bridged),
          // the built-in runtime starts no process and handles SIGTERM: it needs no init (docs/benchmarks.md "Idle agents")
          asPid1: runtime === 'builtin',
        });
        const bwrapArgs = ['--args', '3', ...argv.command];
        const inNet = net ? inNetwork(network, net.nsFile, sandbox.bwrap!, bwrapArgs) : { file: sandbox.bwrap!, args: bwrapArgs };
        const limited = withFileSizeLimit(prlimit, quotaBytes, inNet.file, inNet.args);
        // into the agent's own cgroup before bwrap runs, so everything the agent starts is limited
        const cmd = cgroups ? enter(cgroups.prepare(agentId, planResources(env.AGENT_PLAN)), limited.file, limited.args) : limited;
        child = spawn(cmd.file, cmd.args, {
          cwd: '/',
          env: { PATH: '/usr/bin:/bin' },
          detached: true,
          stdio: ['ignore', out, out, 'pipe', ...(gateway ? [gateway.fd] : [])],
        });
        const pipe = child.stdio[3] as NodeJS.WritableStream | null;
        pipe?.on('error', () => {});
        pipe?.end(Buffer.from(argv.options.map((a) => `${a}\0`).join('')));
      } else {
        const limited = withFileSizeLimit(prlimit, quotaBytes, file, args);
        child = spawn(limited.file, limited.args, { cwd: d.workspace, env, detached: true, stdio: ['ignore', out, out] });
      }
    } catch (err) {
      if (net) await closeAgentNetworks(network, d.base);
      if (bridged) await bridges.close(d.base);
      throw err;
    } finally {
      closeSync(out);
      // the agent holds its own copy of the socket now (or nothing was started: the port is free again)
      gateway?.close();
    }
    if (!child.pid) {
      if (net) await closeAgentNetworks(network, d.base);
      if (bridged) await bridges.close(d.base);
      throw new HostingUnavailableError(`could not start the agent runtime for ${agentId}`);
    }
    child.unref();
    const entry: Owned = { env, uid, child };
    owned.set(agentId, entry);
    child.on('exit', (code, signal) => {
      if (owned.get(agentId) !== entry) return;
      entry.exitCode = code;
      if (!entry.stopping) ctx.onExit?.(agentId, { code, signal });
    });
    child.on('error', () => {});
    // in the sandbox the runtime is bwrap's child (the built-in runtime, PID 1 of its namespace) or grandchild
    // (OpenClaw: bwrap's init between them): the state names the runtime itself, so a signal to it (stop, SIGKILL, SIGSTOP) reaches the agent
    const pid = sandbox.active ? await runtimePid(child.pid) : child.pid;
    entry.pid = pid;
    const state: AgentState = {
      agentId,
      pid,
      startTicks: readProcStat(pid)?.startTicks ?? 0,
      ...(uid !== undefined ? { uid } : {}),
      ...(net ? { network: net } : {}),
      ...(bridged ? { loopbackPorts: bridged } : {}),
      port,
      url: `http://127.0.0.1:${env.AGENT_PORT}`,
      runtime,
      tokenHash: sha256Hex(env.AGENT_GATEWAY_TOKEN!),
      launchHash: launchHash(env),
      startedAt: new Date().toISOString(),
      suspended: false,
      diskQuotaBytes: quotaBytes,
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

  /**
   * Resolves once the freshly started process accepts TCP connections on its port (or has died,
   * or `LISTEN_WAIT_MS` passed). A loopback connect costs microseconds, so deploy() returns the
   * moment the gateway listens and the §4.12 health poll (every 2 s) succeeds on its first probe
   * instead of waiting out a whole interval (bench/provisioning.bench.ts).
   */
  async function waitUntilListening(state: AgentState): Promise<void> {
    // through pasta, or the socket the platform bound for it, the port accepts before the agent listens: ask the agent itself
    if (state.runtime === 'openclaw' || state.network || state.loopbackPorts) return waitUntilLive(state);
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

  return { launch, envFor, launchHash, waitUntilListening };
}
