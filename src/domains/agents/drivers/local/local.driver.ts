/**
 * The `local` driver (default): every agent is a child process on a free loopback port running
 * the built-in runtime (src/runtime/main.ts, with this process's Node) or, with
 * AGENT_RUNTIME=openclaw, the OpenClaw gateway installed by scripts/install-openclaw.sh.
 *
 * Layout per agent, under DATA_DIR/agents/<agentId>/ (the folder and everything but workspace/ and
 * home/ belong to the platform; the agent sees only those two, docs/security.md):
 *   driver-state.json   pid and its start time, uid, port, network, sha256 of the gateway token and of the launch
 *                       environment (no secret)
 *   logs/process.log    the process's own stdout/stderr (and pasta's), opened by the platform; rotated to
 *                       process.log.1 while it runs (agent-disk.service.ts)
 *   disk-usage.json     the last measure of its disk use against its quota (agent-disk.service.ts; docs/agents.md "Disk")
 *   netns-<random>      the agent's network namespace, when pasta serves it (a bind mount, agent-network.service.ts)
 *   loopback/           built-in runtime in the sandbox: `<port>.sock` per platform port it calls, served by
 *                       the platform, read-only for the agent (agent-loopback.service.ts)
 *   gateway.sock        built-in runtime in the sandbox: its gateway's listening socket (the agent holds it;
 *                       the platform forwards 127.0.0.1:<port> to it)
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
 * started or adopted.
 *
 * stop() and suspend() both end every process of the agent (SIGTERM, then SIGKILL after the grace
 * period) and keep its folder and state file: a stopped or suspended agent runs nothing and holds no
 * memory (docs/agents.md "Stop, suspend and restart"); suspend() also marks the state `suspended`,
 * and resume() launches it again from the launch it remembers, as restart() does. Nothing here
 * freezes a process (SIGSTOP): a frozen agent would keep its memory while reading as stopped.
 *
 * A process that ends without the driver stopping it is told to watchExits() listeners at once (the
 * child's exit event; a process adopted from an earlier platform process is polled every
 * ADOPTED_POLL_MS), so the platform sees a crash in seconds rather than at the watchdog's next probe.
 *
 * logs() and stats() read files and /proc without touching the process: local-observe.service.ts.
 *
 * The launch itself (command, sandbox, network, environment, waiting for the port) is
 * local-launch.service.ts; the state file, the folders and the per-agent queue are local-state.service.ts. This
 * file decides when: deploy, adopt, restart, suspend, stop, delete.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort } from '../../../../db/embedded.ts';
import type { Confinement } from '../../../../lib/confined-fs.ts';
import { sha256Hex } from '../../../../lib/crypto.ts';
import { AppError } from '../../../../lib/errors.ts';
import { createKeyedQueue } from '../../../../lib/keyed-queue.ts';
import { probeHealthz } from '../../agent-client/health-probe.client.ts';
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
  type UnitExit,
} from '../driver.contract.ts';
import { detectCgroups } from './containment/agent-cgroup.service.ts';
import { createDiskWatch, diskQuotaBytes, findPrlimit, withFileSizeLimit } from './containment/agent-disk.service.ts';
import { createLoopbackBridges } from './containment/agent-loopback.service.ts';
import { closeAgentNetworks, detectNetwork } from './containment/agent-network.service.ts';
import { agentUid, claimUidRange } from './containment/agent-uids.service.ts';
import { agentProcesses, isAlive, processesOfUid, stopProcess } from './containment/proc.service.ts';
import { detectSandbox, FIRST_AGENT_UID, runInSandbox, type SandboxReport } from './containment/sandbox.service.ts';
import { createLauncher, movePort } from './local-launch.service.ts';
import { createStatsReader, readAgentLogs } from './local-observe.service.ts';
import { type AgentState, createStateStore, type LocalDriverOptions, liveAgentPid, type Owned, portIsFree } from './local-state.service.ts';

/** The name a deleted agent's folder has while its files are removed (agent ids never start with a dot). */
const DELETED_PREFIX = '.deleted-';

type RunOptions = { env: Record<string, string>; timeoutMs: number; maxBuffer: number };

/** How often a process adopted from an earlier platform process (not a child of this one) is looked at, to see it end. */
const ADOPTED_POLL_MS = 2_000;

export function createLocalDriver(options: LocalDriverOptions): HostingDriver {
  const runtime = options.runtime ?? 'builtin';
  const root = join(options.dataDir, 'agents');
  const graceMs = options.stopGraceMs ?? 5_000;
  const probeMs = options.statusProbeTimeoutMs ?? 2_000;
  const owned = new Map<string, Owned>();
  const sandbox: SandboxReport = detectSandbox(options.sandbox ?? 'auto');
  for (const line of sandbox.lines) options.log?.(sandbox.active ? 'info' : 'warn', line);
  const network = detectNetwork(options.network ?? 'internet', sandbox.active, runtime);
  // refused: no agent starts, so the sandbox's one line is all there is to say
  if (!sandbox.refused) for (const line of network.lines) options.log?.(network.isolated ? 'info' : 'warn', line);
  // limits per plan need the platform's rights over the cgroup tree: as root, with the sandbox
  const limits = sandbox.active && sandbox.separateUser ? detectCgroups(options.cgroupRoot) : undefined;
  for (const line of limits?.lines ?? []) options.log?.(limits?.cgroups ? 'info' : 'warn', line);
  const cgroups = limits?.cgroups;
  const statsReader = createStatsReader();
  const bridges = createLoopbackBridges(options.log);

  // Lifecycle calls on one agent run one after another (deploy, restart, suspend, resume, delete):
  // interleaved, two of them could each see "no live process" and each start one, leaving a process
  // that no state file names and so no delete stops. Different agents still run in parallel.
  const serial = createKeyedQueue();
  const store = createStateStore(root);
  /** Deleted agents' folders being removed (deleteNow); shutdown waits for them. */
  const removing = new Set<Promise<void>>();
  const removeInBackground = (dir: string) => {
    const done: Promise<void> = rm(dir, { recursive: true, force: true })
      .catch(() => {})
      .finally(() => removing.delete(done));
    removing.add(done);
  };
  // folders of deleted agents a previous process had not finished removing
  for (const name of existsSync(root) ? readdirSync(root) : []) if (name.startsWith(DELETED_PREFIX)) removeInBackground(join(root, name));
  const { dirs, readState, writeState } = store;
  // docs/agents.md "Disk": RLIMIT_FSIZE at the launch, disk use measured while agents run, process.log rotated
  const prlimit = findPrlimit();
  if (!prlimit)
    options.log?.(
      'warn',
      "agent disk: prlimit (util-linux) not found: agents' files are not size-limited, and an agent over its quota is only reported",
    );

  /**
   * Every process of the agent: its cgroup's (the kernel's list); else, with a user of its own,
   * that user's; else (no sandbox: it runs as the platform's user) those whose environment names it.
   */
  function processesOf(agentId: string, state: AgentState | undefined): number[] {
    if (cgroups) return cgroups.processes(agentId);
    const uid = state?.uid ?? owned.get(agentId)?.uid;
    return uid !== undefined ? processesOfUid(uid) : agentProcesses(agentId, dirs(agentId).workspace);
  }

  const disk = createDiskWatch({
    agentIds: store.agentIds,
    dirs,
    running: (agentId) => {
      const state = readState(agentId);
      if (!liveAgentPid(state)) return undefined;
      return { quotaBytes: state?.diskQuotaBytes ?? diskQuotaBytes(undefined, options.diskQuotaMb) };
    },
    processesOf: (agentId) => processesOf(agentId, readState(agentId)).filter((pid) => pid !== process.pid),
    prlimit,
    asAgent: (agentId) => {
      const uid = sandbox.separateUser ? readState(agentId)?.uid : undefined;
      return uid !== undefined && sandbox.setpriv ? { setpriv: sandbox.setpriv, uid } : undefined;
    },
    restart: (agentId) => serial(agentId, () => relaunch(agentId)),
    log: options.log,
    diskCheckIntervalMs: options.diskCheckIntervalMs,
    processLogCheckIntervalMs: options.processLogCheckIntervalMs,
    processLogMaxBytes: options.processLogMaxBytes,
  });

  /** A new process starts with its whole limit: one the last measure found over its quota is measured again now. */
  async function afterLaunch(agentId: string): Promise<void> {
    disk.forget(agentId);
    if ((await disk.usage(agentId))?.over) void disk.check(agentId).catch(() => undefined);
  }

  // agents run as AGENT_UID_BASE + their database number (agent-uids.service.ts). Only as root, in the sandbox,
  // do they have uids of their own (elsewhere they run as this process's user, and their folders
  // stay its own: a user that is not root could not hand them to another uid anyway), and only
  // then is the host's range of this platform claimed
  const uidBase = options.uidBase ?? FIRST_AGENT_UID;
  const uidOf = (allocated: number | undefined) =>
    allocated === undefined || !sandbox.separateUser ? undefined : agentUid(uidBase, allocated);
  const uidRange = sandbox.separateUser
    ? claimUidRange({
        base: uidBase,
        dataDir: options.dataDir,
        ownUids: new Set(store.agentIds().flatMap((id) => readState(id)?.uid ?? [])),
        ...(options.uidRegistryDir ? { registryDir: options.uidRegistryDir } : {}),
      })
    : undefined;
  for (const line of uidRange?.lines ?? []) options.log?.(line.level, line.message);

  /**
   * AGENT_SANDBOX=auto on a machine without a working sandbox (docs/agents.md "Sandbox"): no agent
   * starts, and one that still runs (started before, unsandboxed) is stopped; 503 naming AGENT_SANDBOX=off.
   */
  async function refuseUnsandboxed(agentId: string): Promise<void> {
    if (!sandbox.refused) return;
    await stopAgent(agentId, readState(agentId));
    throw new AppError('AGENT_SANDBOX_NOT_CONFIGURED', sandbox.refused);
  }
  // watchExits(): processes that end without the driver stopping them
  const exitListeners = new Set<(agentId: string, exit: UnitExit) => void>();
  const tellExit = (agentId: string, exit: UnitExit) => {
    for (const listener of exitListeners) {
      try {
        listener(agentId, exit);
      } catch {
        /* a listener's failure is its own */
      }
    }
  };
  // an adopted process is not our child: no exit event, so it is looked at every ADOPTED_POLL_MS
  let adoptedPoll: NodeJS.Timeout | undefined;
  const pollAdopted = () => {
    for (const [agentId, entry] of owned) {
      if (entry.child || entry.stopping || entry.exitCode !== undefined || entry.pid === undefined || isAlive(entry.pid)) continue;
      entry.exitCode = null;
      tellExit(agentId, { code: null, signal: null });
    }
  };

  const { launch, envFor, launchHash, waitUntilListening } = createLauncher({
    options,
    runtime,
    root,
    sandbox,
    network,
    store,
    owned,
    cgroups,
    bridges,
    prlimit,
    onExit: tellExit,
  });

  /** The previous port when it is free again (a stable URL across restarts), else a new free one. */
  const pickPort = async (previous: AgentState | undefined) => (previous && (await portIsFree(previous.port)) ? previous.port : freePort());

  /**
   * The launch we started it with (this process), or a fresh one from loadSpec (after a platform
   * restart). Never read back from the running process: /proc/<pid>/environ is memory the agent
   * can rewrite (docs/security.md N4), so it could choose what a restart runs with the platform's rights.
   */
  async function launchEnv(
    agentId: string,
    state: AgentState | undefined,
  ): Promise<{ env: Record<string, string>; uid?: number | undefined } | undefined> {
    const mine = owned.get(agentId);
    if (mine) return { env: { ...mine.env }, uid: mine.uid };
    const spec = await options.loadSpec?.(agentId);
    // the previous port: relaunch takes another only if it is still taken once the old process is gone
    return spec ? { env: envFor(spec, state?.port ?? (await freePort())), uid: uidOf(spec.sandboxUid) } : undefined;
  }

  async function stopAgent(agentId: string, state: AgentState | undefined) {
    const entry = owned.get(agentId);
    if (entry) entry.stopping = true;
    const pid = liveAgentPid(state);
    if (pid) await stopProcess(pid, graceMs);
    statsReader.forget(state?.pid ?? -1);
    // any other process of this agent (one started by another platform process on the same DATA_DIR,
    // or left by a crash between spawn and the state file): at most one process per agent lives.
    // In its cgroup, the group's processes are the agent's (the kernel says so, and the group is
    // named by the agent's id, so another platform on this machine whose agents got the same uids
    // from their own database is never touched). Else, with a user of its own, that user's
    // processes; without one the agent runs as the platform's user anyway, and its environment names it
    const strays = processesOf(agentId, state);
    await Promise.all(strays.map((p) => stopProcess(p, graceMs)));
    await closeAgentNetworks(network, dirs(agentId).base);
    await bridges.close(dirs(agentId).base);
    cgroups?.remove(agentId);
  }

  async function relaunch(agentId: string): Promise<void> {
    await refuseUnsandboxed(agentId);
    const state = readState(agentId);
    const launchWith = await launchEnv(agentId, state);
    if (!launchWith) throw new AgentNotDeployedError(`agent ${agentId} has no running process to restart; deploy it again`);
    const { env } = launchWith;
    await stopAgent(agentId, state);
    // the old port is normally free again once the process is gone; take another if something grabbed it
    if (!(await portIsFree(Number(env.AGENT_PORT)))) movePort(env, await freePort());
    const started = await launch(agentId, env, launchWith.uid ?? state?.uid);
    await afterLaunch(agentId);
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
    // a process that lives is running, answering or not (one frozen by someone else is a hung gateway: the watchdog repairs it)
    return { status: (await probeHealthz(state.url, probeMs)) ? 'healthy' : 'running', url: state.url };
  }

  async function deployNow(spec: AgentDeploySpec): Promise<Deployment> {
    await refuseUnsandboxed(spec.agentId);
    const uid = uidOf(spec.sandboxUid);
    const d = dirs(spec.agentId);
    mkdirSync(d.workspace, { recursive: true });
    const previous = readState(spec.agentId);
    const pid = liveAgentPid(previous);
    if (previous && pid && !previous.suspended && previous.runtime === runtime && previous.tokenHash === sha256Hex(spec.gatewayToken)) {
      // same launch (token, configuration, model settings, port, user) as the state file recorded, and
      // answering: adopt it. The comparison is with the platform's own record, not the process's memory
      const env = envFor(spec, previous.port);
      if (previous.launchHash === launchHash(env) && previous.uid === uid && (await probeHealthz(previous.url, probeMs))) {
        if (!owned.has(spec.agentId)) owned.set(spec.agentId, { env, uid, pid });
        return { externalId: `local-${pid}`, url: previous.url, status: 'healthy' };
      }
    }
    await stopAgent(spec.agentId, previous);
    const state = await launch(spec.agentId, envFor(spec, await pickPort(previous)), uid);
    await afterLaunch(spec.agentId);
    await waitUntilListening(state);
    return { externalId: `local-${state.pid}`, url: state.url, status: 'starting' };
  }

  /** No process, its state on disk, marked suspended: resume() launches it again. */
  async function suspendNow(agentId: string): Promise<void> {
    const state = readState(agentId);
    if (!state) throw new AgentNotDeployedError(`agent ${agentId} is not deployed`);
    writeState({ ...state, suspended: true }); // first: while it ends, it reads suspended, never crashed
    await stopAgent(agentId, state);
  }

  /** Running already: nothing to do; else launched again from the launch it remembers (as restart()). */
  async function resumeNow(agentId: string): Promise<void> {
    await refuseUnsandboxed(agentId);
    const state = readState(agentId);
    if (!state) throw new AgentNotDeployedError(`agent ${agentId} is not deployed`);
    if (liveAgentPid(state) && !state.suspended) return;
    await relaunch(agentId);
  }

  async function deleteNow(agentId: string): Promise<void> {
    const d = dirs(agentId);
    // stopped first, so nothing of the agent changes the tree while it is removed (rm never follows links)
    await stopAgent(agentId, readState(agentId));
    owned.delete(agentId);
    // gone from the agents' folders at once (a rename: no agent id starts with a dot), its files in
    // the background: an OpenClaw agent's home holds thousands of files (compile cache, state), which
    // take seconds to remove on a busy machine, and the delete is answered within the web app's 10 s backend call
    const trash = join(root, `${DELETED_PREFIX}${agentId}-${randomBytes(4).toString('hex')}`);
    try {
      renameSync(d.base, trash);
    } catch {
      rmSync(d.base, { recursive: true, force: true });
      return;
    }
    removeInBackground(trash);
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
  async function runAsAgent(agentId: string, state: AgentState | undefined, file: string, args: string[], o: RunOptions): Promise<string> {
    const uid = sandbox.separateUser ? state?.uid : undefined;
    if (sandbox.separateUser && uid === undefined) throw new HostingUnavailableError(`agent ${agentId} has not been started here yet`);
    const net = state?.network && network.nsenter && existsSync(state.network.nsFile) && liveAgentPid(state) ? state.network : undefined;
    // the agent's own file size limit (docs/agents.md "Disk"): none of its files grows while it is over its quota
    const quota = state?.diskQuotaBytes ?? diskQuotaBytes(undefined, options.diskQuotaMb);
    const inSandbox = prlimit && /^\/(usr\/)?s?bin\//.test(prlimit) ? prlimit : undefined; // only /usr is bound in it
    const cmd = withFileSizeLimit(inSandbox, (await disk.usage(agentId))?.over ? 0 : quota, file, args);
    return runInSandbox(
      sandbox,
      { dir: dirs(agentId).workspace, uid, netns: net ? { nsenter: network.nsenter!, file: net.nsFile } : undefined },
      cmd.file,
      cmd.args,
      o,
    );
  }

  return {
    kind: 'local',
    status,

    localGatewaySocket(origin: string): string | undefined {
      const m = /^http:\/\/127\.0\.0\.1:(\d+)$/.exec(origin);
      return m ? bridges.gatewaySocketFor(Number(m[1])) : undefined;
    },

    /**
     * The backend's start (before its workers): agents that outlived the previous platform process
     * are reached, and reach the platform, through this process's forwarders from now on, on the
     * gateway port their state records (the URL the platform has for them). A web-only process
     * never calls it, so it never competes for those ports.
     */
    async ready(): Promise<void> {
      disk.start(); // the backend's process measures and rotates; a web-only one only reads what it recorded
      if (!network.bridge) return;
      await Promise.all(
        store.agentIds().map(async (agentId) => {
          const state = readState(agentId);
          if (!state?.loopbackPorts || !liveAgentPid(state)) return;
          await bridges
            .serve(dirs(agentId).base, { gateway: state.port, platform: state.loopbackPorts }, false)
            .catch((err) => options.log?.('warn', `agent ${agentId}: its sockets could not be served again: ${(err as Error).message}`));
        }),
      );
    },

    deploy(spec: AgentDeploySpec): Promise<Deployment> {
      dirs(spec.agentId); // validates the id before it names a queue
      return serial(spec.agentId, () => deployNow(spec));
    },

    restart(agentId: string): Promise<void> {
      dirs(agentId);
      return serial(agentId, () => relaunch(agentId));
    },

    /**
     * Ends every process of the agent (the owner's Stop; the watchdog's repair); restart() starts
     * it again from the launch it remembers.
     */
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

    watchExits(listener: (agentId: string, exit: UnitExit) => void): () => void {
      exitListeners.add(listener);
      if (!adoptedPoll) {
        adoptedPoll = setInterval(pollAdopted, ADOPTED_POLL_MS);
        adoptedPoll.unref();
      }
      return () => {
        exitListeners.delete(listener);
        if (exitListeners.size === 0) {
          clearInterval(adoptedPoll);
          adoptedPoll = undefined;
        }
      };
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
        diskUsage: () => disk.usage(agentId),
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
      clearInterval(adoptedPoll);
      adoptedPoll = undefined;
      exitListeners.clear();
      await disk.stop();
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
      await bridges.closeAll();
      await Promise.all(removing);
      uidRange?.release();
    },
  };
}
