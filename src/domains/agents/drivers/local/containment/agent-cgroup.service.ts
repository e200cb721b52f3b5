/**
 * §4.7 memory and CPU per plan for local agents, enforced by the kernel (docs/agents.md "Sandbox",
 * docs/security.md "Memory and CPU"): each agent gets a control group of its own under
 * `agent-platform/<agentId>` with the plan's memory (no swap beyond it), its CPUs as a CFS quota
 * and a bound on its number of processes. A fork bomb or a leak inside one agent then ends in that
 * agent's group (the kernel's OOM killer picks a process there), not in the platform or its
 * neighbours.
 *
 * Both hierarchies are supported: cgroup v2 (one unified tree: memory.max, memory.swap.max,
 * cpu.max, pids.max) where the platform may enable the controllers for a subtree, and cgroup v1
 * (one tree per controller: memory.limit_in_bytes, memory.memsw.limit_in_bytes, cpu.cfs_quota_us,
 * pids.max), which is what these machines have. Only the platform writes there (sysfs, as root);
 * the agent's process joins its group before it runs a single instruction of the agent: the
 * launch wraps the command in `/bin/sh`, which writes its own pid into the group and then execs
 * (enter()), so nothing the sandbox forks can start outside it.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlanResources } from '../../agent-env.rules.ts';

/** The groups live under this name in each hierarchy; the platform creates nothing else there. */
const PARENT = 'agent-platform';
/** processes (threads count too) an agent may have at once: a runtime, its tools, never a fork bomb */
export const AGENT_PIDS_MAX = 512;
const CFS_PERIOD_US = 100_000;

export type AgentCgroups = {
  readonly version: 1 | 2;
  /**
   * Creates (or updates) the agent's group with the plan's limits; returns the files the launched
   * process writes its pid to (enter()).
   */
  prepare(agentId: string, resources: Pick<PlanResources, 'memoryMb' | 'cpus'>): string[];
  /**
   * Every process in the agent's group (empty when it has none). The agent cannot leave its group
   * (cgroup.procs elsewhere is root's), and the group is named by the agent's id, unique across
   * platforms sharing this machine, unlike its uid (each database numbers its agents' users alike).
   */
  processes(agentId: string): number[];
  /** The agent's group is removed once no process is left in it (a no-op while one still is). */
  remove(agentId: string): void;
};

export type CgroupsReport = { cgroups: AgentCgroups | undefined; lines: string[] };

const write = (file: string, value: string | number) => writeFileSync(file, String(value));

/**
 * Finds what this machine lets the platform use. `root` is the cgroup mount (tests point it at a
 * folder shaped like one); `selfCgroup` the text of /proc/self/cgroup.
 */
export function detectCgroups(root = '/sys/fs/cgroup', selfCgroup = safeRead('/proc/self/cgroup')): CgroupsReport {
  if (existsSync(join(root, 'cgroup.controllers'))) return detectV2(root, selfCgroup);
  const dirs = { memory: join(root, 'memory'), cpu: join(root, 'cpu'), pids: join(root, 'pids') };
  if (Object.values(dirs).every((d) => existsSync(join(d, 'cgroup.procs')))) return detectV1(dirs);
  return { cgroups: undefined, lines: ['agents: no memory/CPU limits per plan (no cgroup v1 or v2 controllers found)'] };
}

function detectV1(dirs: { memory: string; cpu: string; pids: string }): CgroupsReport {
  const parents = Object.values(dirs).map((d) => join(d, PARENT));
  try {
    for (const p of parents) mkdirSync(p, { recursive: true });
  } catch (err) {
    return { cgroups: undefined, lines: [`agents: no memory/CPU limits per plan (cannot create cgroups: ${(err as Error).message})`] };
  }
  const group = (agentId: string) => ({
    memory: join(dirs.memory, PARENT, agentId),
    cpu: join(dirs.cpu, PARENT, agentId),
    pids: join(dirs.pids, PARENT, agentId),
  });
  return {
    lines: ['agents: memory, CPU and process limits per plan through cgroup v1 (memory, cpu, pids)'],
    cgroups: {
      version: 1,
      prepare(agentId, resources) {
        const g = group(agentId);
        for (const d of Object.values(g)) mkdirSync(d, { recursive: true });
        const bytes = resources.memoryMb * 1024 * 1024;
        // memsw (memory + swap) may only be set at or above the memory limit: lower it last when
        // shrinking, raise it first when growing — setting memory first, then memsw, covers a fresh group
        const memsw = join(g.memory, 'memory.memsw.limit_in_bytes');
        if (existsSync(memsw)) {
          try {
            write(memsw, -1); // unlimited first, so the memory limit below is accepted either way
          } catch {}
        }
        write(join(g.memory, 'memory.limit_in_bytes'), bytes);
        if (existsSync(memsw)) write(memsw, bytes);
        write(join(g.cpu, 'cpu.cfs_period_us'), CFS_PERIOD_US);
        write(join(g.cpu, 'cpu.cfs_quota_us'), Math.round(resources.cpus * CFS_PERIOD_US));
        write(join(g.pids, 'pids.max'), AGENT_PIDS_MAX);
        return Object.values(g).map((d) => join(d, 'cgroup.procs'));
      },
      processes: (agentId) => readProcs(join(group(agentId).pids, 'cgroup.procs')),
      remove(agentId) {
        for (const d of Object.values(group(agentId))) removeGroup(d);
      },
    },
  };
}

function detectV2(root: string, selfCgroup: string): CgroupsReport {
  // the platform's own group (0::/path); agents' groups go beside it under the mount's root when the
  // platform is in the root group (a container's namespaced root, or a machine as root), since a
  // group with processes of its own cannot hand controllers to children ("no internal processes")
  const own = /^0::(.*)$/m.exec(selfCgroup)?.[1]?.trim() ?? '/';
  const available = safeRead(join(root, 'cgroup.controllers')).split(/\s+/);
  const missing = ['memory', 'cpu', 'pids'].filter((c) => !available.includes(c));
  if (missing.length)
    return { cgroups: undefined, lines: [`agents: no memory/CPU limits per plan (cgroup v2 without ${missing.join(', ')})`] };
  const parent = join(root, PARENT);
  try {
    if (own !== '/')
      throw new Error(`the platform runs in ${own}, not the root group: delegate a subtree to it (systemd Delegate=yes) and run it there`);
    write(join(root, 'cgroup.subtree_control'), '+memory +cpu +pids');
    mkdirSync(parent, { recursive: true });
    write(join(parent, 'cgroup.subtree_control'), '+memory +cpu +pids');
  } catch (err) {
    return { cgroups: undefined, lines: [`agents: no memory/CPU limits per plan (cgroup v2: ${(err as Error).message})`] };
  }
  return {
    lines: ['agents: memory, CPU and process limits per plan through cgroup v2 (memory.max, cpu.max, pids.max)'],
    cgroups: {
      version: 2,
      prepare(agentId, resources) {
        const g = join(parent, agentId);
        mkdirSync(g, { recursive: true });
        write(join(g, 'memory.max'), resources.memoryMb * 1024 * 1024);
        if (existsSync(join(g, 'memory.swap.max'))) write(join(g, 'memory.swap.max'), 0);
        write(join(g, 'cpu.max'), `${Math.round(resources.cpus * CFS_PERIOD_US)} ${CFS_PERIOD_US}`);
        write(join(g, 'pids.max'), AGENT_PIDS_MAX);
        return [join(g, 'cgroup.procs')];
      },
      processes: (agentId) => readProcs(join(parent, agentId, 'cgroup.procs')),
      remove(agentId) {
        removeGroup(join(parent, agentId));
      },
    },
  };
}

/**
 * The command that runs `file args` inside the groups: /bin/sh writes its own pid to each
 * cgroup.procs file, then execs (same pid, so the whole tree it starts is inside). The paths are
 * arguments, never part of the script. Exit 125 when a write fails: nothing runs unconfined.
 */
export function enter(procsFiles: string[], file: string, args: string[]): { file: string; args: string[] } {
  if (procsFiles.length === 0) return { file, args };
  const script = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"';
  return { file: '/bin/sh', args: ['-c', script, 'agent-cgroup', String(procsFiles.length), ...procsFiles, file, ...args] };
}

function readProcs(file: string): number[] {
  return safeRead(file)
    .split('\n')
    .map(Number)
    .filter((pid) => Number.isInteger(pid) && pid > 0);
}

function removeGroup(dir: string) {
  try {
    rmdirSync(dir); // a cgroup directory is removed with rmdir; EBUSY while a process is left
  } catch {}
}

function safeRead(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
