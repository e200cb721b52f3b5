/**
 * What the local driver keeps per agent on disk, and the small helpers around it: the folders of
 * an agent (docs/security.md: everything but workspace/ and home/ is the platform's), the state
 * file that says which process is the agent's, process.log (rotated as agent-disk.service.ts does it), the
 * per-agent serial queue.
 */

import { type ChildProcess, execFile } from 'node:child_process';
import { chmodSync, lchownSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { AgentDeploySpec } from '../driver.contract.ts';
import { rotateProcessLog } from './containment/agent-disk.service.ts';
import type { AgentNetwork, AgentNetworkMode } from './containment/agent-network.service.ts';
import { isAlive, readProcStat } from './containment/proc.service.ts';
import type { SandboxMode } from './containment/sandbox.service.ts';

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
  /** AGENT_SANDBOX: auto (bubblewrap when it works here, else agents are refused), bwrap (required), off */
  sandbox?: SandboxMode;
  /** AGENT_UID_BASE: the first OS uid of this platform's agents (agent-uids.service.ts; default FIRST_AGENT_UID) */
  uidBase?: number | undefined;
  /** tests: the host-wide folder where platforms register their uid range (default UID_REGISTRY_DIR) */
  uidRegistryDir?: string;
  /** says at creation which protections are active (one line each) */
  log?: (level: 'info' | 'warn', message: string) => void;
  /** tests: a script run instead of src/runtime/main.ts by the built-in runtime (its folder is bound read-only in the sandbox) */
  runtimeEntry?: string;
  /** AGENT_NETWORK: internet (default), platform, host (agent-network.service.ts) */
  network?: AgentNetworkMode;
  /** tests: the cgroup mount the per-plan limits are written under (agent-cgroup.service.ts; default /sys/fs/cgroup) */
  cgroupRoot?: string;
  /** AGENT_DISK_QUOTA_MB: every agent's disk quota, replacing its plan's (agent-disk.service.ts) */
  diskQuotaMb?: number | undefined;
  /** tests: how often disk use is measured, and how often process.log is looked at (LIMITS' defaults) */
  diskCheckIntervalMs?: number;
  processLogCheckIntervalMs?: number;
  /** tests: process.log's rotation size (LIMITS.processLogMaxBytes) */
  processLogMaxBytes?: number;
};

export type AgentState = {
  agentId: string;
  pid: number;
  /** the process's start time (/proc/<pid>/stat field 22): a pid reused by another process does not match */
  startTicks?: number;
  /** the agent's own OS user (sandboxed as root) */
  uid?: number;
  /** its network namespace and pasta, when it has its own */
  network?: AgentNetwork;
  /** built-in runtime in the sandbox: the platform ports forwarded to it over Unix sockets (agent-loopback.service.ts) */
  loopbackPorts?: number[];
  port: number;
  url: string;
  runtime: LocalRuntimeKind;
  tokenHash: string;
  /** sha256 of the launch environment: deploy() adopts only an identical launch */
  launchHash: string;
  startedAt: string;
  suspended: boolean;
  /** its disk quota, which is also every process's RLIMIT_FSIZE (agent-disk.service.ts); absent in states written before it */
  diskQuotaBytes?: number;
};

export type Owned = {
  env: Record<string, string>;
  uid?: number | undefined;
  /** the process this instance started or adopted (shutdown stops that one, not a successor another instance started) */
  pid?: number;
  child?: ChildProcess;
  exitCode?: number | null;
  stopping?: boolean;
};

const AGENT_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** The folders and files of one agent under DATA_DIR/agents (the id is checked before it names a path). */
export function agentDirs(root: string, agentId: string) {
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
}

/** The state files under `root` (DATA_DIR/agents). */
export function createStateStore(root: string) {
  const dirs = (agentId: string) => agentDirs(root, agentId);
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

  /** The platform's own folders of an agent (never inside workspace/ or home/): 0700, the platform's. */
  function platformDirs(agentId: string) {
    const d = dirs(agentId);
    mkdirSync(d.platformLogs, { recursive: true, mode: 0o700 });
    chmodSync(d.base, 0o700);
    return d;
  }

  /**
   * process.log of the platform's logs folder, opened for appending (O_APPEND: after a rotation
   * truncates it, the agent's next line lands at its new end); rotated first when it is over its size.
   */
  async function openProcessLog(agentId: string, maxBytes: number): Promise<number> {
    const file = join(platformDirs(agentId).platformLogs, 'process.log');
    await rotateProcessLog(file, maxBytes).catch(() => false); // a log kept whole is no reason not to start
    return openSync(file, 'a', 0o600);
  }

  /** The agents that have a folder here (ids that could not name one are skipped). */
  function agentIds(): string[] {
    try {
      return readdirSync(root).filter((name) => AGENT_ID.test(name));
    } catch {
      return [];
    }
  }

  return { dirs, readState, writeState, platformDirs, openProcessLog, agentIds };
}
export type StateStore = ReturnType<typeof createStateStore>;

/**
 * Alive and really the process the state file names: same pid and the same kernel start time (a
 * pid reused by an unrelated process after a reboot or a wrap does not match). Nothing the agent
 * can write (its environment, its command line) decides it.
 */
export const liveAgentPid = (state: AgentState | undefined): number | undefined => {
  if (!state || !isAlive(state.pid)) return undefined;
  if (state.startTicks === undefined || readProcStat(state.pid)?.startTicks !== state.startTicks) return undefined;
  return state.pid;
};

/**
 * Gives the agent's user its workspace or home folder. The folder's own path is the platform's
 * (its parent belongs to the platform), so lchown on it is safe; its content is the agent's, and
 * a walk over it as root is not (docs/security.md N3/N14): only when the folder belongs to another uid (a new
 * agent user, the uids of migration 090 replacing derived ones) is the tree handed over, by
 * `chown -R -P` (never follows a link, descends with openat) in a child process while the agent is
 * stopped, so the event loop never waits on a tree the agent made large.
 */
export async function handOver(dir: string, uid: number): Promise<void> {
  const st = lstatSync(dir);
  if (!st.isDirectory()) throw new Error(`${dir} is not a folder`);
  if (st.uid !== uid || st.gid !== uid) {
    await promisify(execFile)('chown', ['-R', '-P', `${uid}:${uid}`, dir], { timeout: 300_000, env: { PATH: '/usr/bin:/bin' } });
    lchownSync(dir, uid, uid);
  }
  chmodSync(dir, 0o700);
}

export async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}
