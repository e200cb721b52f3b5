/**
 * Process facts for the local driver, read from Linux /proc (the platform's supported host).
 * Elsewhere (no /proc) liveness still works through signal 0 and the numbers read as 0.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { totalmem } from 'node:os';

/** USER_HZ: 100 on every Linux architecture Node supports (the kernel fixes it for user space). */
const CLOCK_TICKS = 100;
const PAGE_SIZE = 4096;

export type ProcStat = {
  pid: number;
  ppid: number;
  pgrp: number;
  state: string;
  ticks: number;
  threads: number;
  startTicks: number;
  rssBytes: number;
};

export function readProcStat(pid: number): ProcStat | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the command name (field 2) is in parentheses and may contain spaces: split after the last ')'
    const rest = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state); field n is rest[n - 3]
    const f = (n: number) => Number(rest[n - 3]);
    return {
      pid,
      ppid: f(4),
      pgrp: f(5),
      state: rest[0]!,
      ticks: f(14) + f(15),
      threads: f(20),
      startTicks: f(22),
      rssBytes: f(24) * PAGE_SIZE,
    };
  } catch {
    return undefined;
  }
}

/** true when `pid` exists and is not a zombie. */
export function isAlive(pid: number | undefined): boolean {
  if (!pid || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const stat = readProcStat(pid);
  return stat ? stat.state !== 'Z' && stat.state !== 'X' : true;
}

/**
 * The environment a process was started with (readable for our own user's processes). Read into an
 * object without a prototype: the process wrote these names, and `__proto__=…` must be a name like
 * any other, not a reach into Object.prototype.
 */
export function readEnviron(pid: number): Record<string, string> | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/environ`, 'utf8');
    const env: Record<string, string> = Object.create(null);
    for (const entry of raw.split('\0')) {
      const i = entry.indexOf('=');
      if (i > 0) env[entry.slice(0, i)] = entry.slice(i + 1);
    }
    return env;
  } catch {
    return undefined;
  }
}

/**
 * Every live process started for `agentId` (its environment names it), optionally only those
 * whose AGENT_WORKSPACE is `workspace` (another DATA_DIR may hold an agent of the same id).
 * Children of a runtime inherit its environment, so tools it started are found as well.
 * Only for agents without a user of their own (no sandbox, or not root: they run as the platform's
 * user anyway); a sandboxed agent's processes are found by uid (processesOfUid). The environment is
 * writable by the process itself, so this only chooses processes to stop: a process can put itself
 * on an agent's list, never another process, and nothing read here is run or trusted.
 */
export function agentProcesses(agentId: string, workspace?: string): number[] {
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const name of entries) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const env = readEnviron(Number(name));
    if (!env || env.AGENT_ID !== agentId) continue;
    if (workspace !== undefined && env.AGENT_WORKSPACE !== workspace) continue;
    if (isAlive(Number(name))) out.push(Number(name));
  }
  return out;
}

/** `pid` and all its descendants (a runtime may start tools as child processes). */
export function processTree(pid: number): ProcStat[] {
  const root = readProcStat(pid);
  if (!root) return [];
  const byParent = new Map<number, ProcStat[]>();
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [root];
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    const s = readProcStat(Number(name));
    if (!s) continue;
    const list = byParent.get(s.ppid) ?? [];
    list.push(s);
    byParent.set(s.ppid, list);
  }
  const out: ProcStat[] = [root];
  for (let i = 0; i < out.length; i++) for (const child of byParent.get(out[i]!.pid) ?? []) out.push(child);
  return out;
}

function systemUptimeSeconds(): number | undefined {
  try {
    return Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  } catch {
    return undefined;
  }
}

/** Resident bytes from /proc/<pid>/status VmRSS (kB), the figure `ps` and `top` show. */
function vmRssBytes(pid: number): number | undefined {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

export type TreeUsage = { ticks: number; rssBytes: number; threads: number; processes: number; uptimeSeconds: number; at: number };

export function treeUsage(pid: number): TreeUsage | undefined {
  const tree = processTree(pid);
  if (tree.length === 0) return undefined;
  let ticks = 0;
  let rss = 0;
  let threads = 0;
  for (const p of tree) {
    ticks += p.ticks;
    rss += vmRssBytes(p.pid) ?? p.rssBytes;
    threads += p.threads;
  }
  const up = systemUptimeSeconds();
  return {
    ticks,
    rssBytes: rss,
    threads,
    processes: tree.length,
    uptimeSeconds: up === undefined ? 0 : Math.max(0, up - tree[0]!.startTicks / CLOCK_TICKS),
    at: Date.now(),
  };
}

/** CPU percent of one core between two samples of the same process tree. */
export const cpuPercent = (a: TreeUsage, b: TreeUsage): number => {
  const seconds = (b.at - a.at) / 1000;
  if (seconds <= 0) return 0;
  return Math.max(0, Math.round(((b.ticks - a.ticks) / CLOCK_TICKS / seconds) * 1000) / 10);
};

export const memoryPercentOfTotal = (bytes: number): number => Math.round((bytes / totalmem()) * 10_000) / 100;

/** The command name of a process (/proc/<pid>/comm), or undefined when it is gone. */
export function readComm(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/**
 * Sends `signal` to the process group `pid` belongs to (drivers start agents as group leaders; in
 * the sandbox the leader is bwrap and `pid` the runtime inside it), falling back to the pid. Never
 * to this process's own group.
 */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  const group = readProcStat(pid)?.pgrp ?? pid;
  const own = readProcStat(process.pid)?.pgrp;
  try {
    if (group > 1 && group !== own) process.kill(-group, signal);
    else process.kill(pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      /* already gone */
    }
  }
}

/** SIGTERM the group, wait up to `graceMs`, then SIGKILL; resolves when the process is gone. */
export async function stopProcess(pid: number, graceMs: number): Promise<void> {
  if (!isAlive(pid)) return;
  // a group leader (an unsandboxed runtime) gets SIGTERM with its group; a runtime inside a sandbox
  // alone, so it exits cleanly and bwrap, which waits for it, ends with its status (not killed by a signal)
  if (readProcStat(pid)?.pgrp === pid) signalGroup(pid, 'SIGTERM');
  else {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      /* gone */
    }
  }
  signalGroup(pid, 'SIGCONT'); // a process someone froze (SIGSTOP) only acts on SIGTERM once continued
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  signalGroup(pid, 'SIGKILL');
  const killDeadline = Date.now() + 2_000;
  while (isAlive(pid) && Date.now() < killDeadline) await new Promise((r) => setTimeout(r, 25));
}

/** The real uid of a process (/proc/<pid>/status, written by the kernel), or undefined when it is gone. */
export function processUid(pid: number): number | undefined {
  try {
    const m = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Every live process running as `uid` (an agent's own user: whatever it started, wherever). */
export function processesOfUid(uid: number): number[] {
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  return entries.filter((n) => /^\d+$/.test(n) && processUid(Number(n)) === uid && isAlive(Number(n))).map(Number);
}
