/**
 * Which platform processes run on a DATA_DIR now, so a start can refuse to become a second
 * platform on data another one serves (docs/configuration.md "Several platforms on one machine").
 * Two processes on one DATA_DIR are one platform when they are its two halves (`npm start -- web`
 * beside `npm start -- backend`) or web replicas; they are two platforms when both would run the
 * backend, whose start takes over every agent of the DATA_DIR (it adopts or redeploys them), or
 * when both would listen on one port.
 *
 * One file per live process in DATA_DIR/platform.processes/<pid namespace>-<pid>.json (pid, its
 * kernel start time, role, ports), written whole under a temporary name and renamed, and removed
 * when the process exits. A file whose process is gone (killed: no exit handler ran) or whose pid
 * now belongs to another process (another start time) is stale: ignored and removed. Processes
 * in another pid namespace (containers sharing the DATA_DIR volume, each with its own network
 * too: docs/production.md "Compose") cannot be seen from here: their entries are left to them and
 * not counted. The caller checks and registers while it holds the DATA_DIR's start-up lock, so
 * two starts at once cannot both pass.
 */
import { mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, relative } from 'node:path';

export type PlatformRole = 'all' | 'web' | 'backend';

export type PlatformProcess = {
  pid: number;
  /** kernel start time of the pid (clock ticks since boot, /proc/<pid>/stat); null where there is no /proc */
  startTicks: string | null;
  startedAt: string;
  role: PlatformRole;
  host: string;
  /** the ports this process listens on (null: it does not run that app) */
  webPort: number | null;
  backendPort: number | null;
  /** it runs the backend with the local hosting driver: the agents of this DATA_DIR are its processes */
  runsAgents: boolean;
  /** the pid namespace the pid is in ('' where there is no /proc) */
  pidNamespace: string;
};

const DIR = 'platform.processes';

/** This process's pid namespace (the inode of /proc/self/ns/pid), '' where there is none to read. */
function pidNamespace(): string {
  try {
    return /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? '';
  } catch {
    return '';
  }
}

/** Kernel start time of a live, non-zombie process; undefined when it is gone. */
function startTicksOf(pid: number): string | null | undefined {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return undefined;
  }
  try {
    const raw = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
    return fields[19] ?? null;
  } catch {
    return null; // no /proc here: the pid alone has to do
  }
}

const runsBackend = (role: PlatformRole) => role !== 'web';

/** This process as an entry of the registry. */
export function thisProcess(o: {
  role: PlatformRole;
  host: string;
  webPort: number;
  backendPort: number;
  localAgents: boolean;
}): PlatformProcess {
  return {
    pid: process.pid,
    startTicks: startTicksOf(process.pid) ?? null,
    startedAt: new Date().toISOString(),
    role: o.role,
    host: o.host,
    webPort: o.role === 'backend' ? null : o.webPort,
    backendPort: o.role === 'web' ? null : o.backendPort,
    runsAgents: runsBackend(o.role) && o.localAgents,
    pidNamespace: pidNamespace(),
  };
}

const fileOf = (dir: string, p: PlatformProcess) => join(dir, `${p.pidNamespace || 'proc'}-${p.pid}.json`);

/** The live platform processes of `dataDir` other than this one; stale entries are removed. */
export function livePlatformProcesses(dataDir: string): PlatformProcess[] {
  const dir = join(dataDir, DIR);
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => /^\w+-\d+\.json$/.test(n));
  } catch {
    return [];
  }
  const ours = pidNamespace();
  const live: PlatformProcess[] = [];
  for (const name of names) {
    const file = join(dir, name);
    let entry: PlatformProcess;
    try {
      entry = JSON.parse(readFileSync(file, 'utf8')) as PlatformProcess;
    } catch {
      continue; // unreadable: not a registration this code wrote whole (the rename is atomic)
    }
    // another namespace's pid means nothing here: neither counted nor removed
    if ((entry.pidNamespace ?? '') !== ours) continue;
    if (entry.pid === process.pid) continue;
    const ticks = typeof entry.pid === 'number' ? startTicksOf(entry.pid) : undefined;
    const same = ticks !== undefined && (ticks === null || entry.startTicks === null || ticks === entry.startTicks);
    if (same) live.push(entry);
    else rmSync(file, { force: true });
  }
  return live;
}

/**
 * Why `me` cannot run beside `other` on one DATA_DIR, or undefined when they are halves of one
 * platform (web beside backend, web replicas on other ports).
 */
export function overlap(me: PlatformProcess, other: PlatformProcess): string | undefined {
  if (me.runsAgents && other.runsAgents) return 'both would run its backend and so its agents';
  const mine = [me.webPort, me.backendPort].filter((p): p is number => p !== null);
  const shared = [other.webPort, other.backendPort].find((p) => p !== null && mine.includes(p));
  if (shared !== undefined) return `both would listen on port ${shared}`;
  return undefined;
}

/** Records this process until it exits (the file goes with a normal exit, a signal or a failed start). */
export function registerPlatformProcess(dataDir: string, me: PlatformProcess): void {
  const dir = join(dataDir, DIR);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = fileOf(dir, me);
  const tmp = `${file}.${process.hrtime.bigint()}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(me)}\n`, { mode: 0o600 });
  renameSync(tmp, file);
  process.on('exit', () => rmSync(file, { force: true }));
}

/** Whether `port` can be bound on `host` now (EADDRINUSE: another program listens there). */
export function portFree(host: string, port: number): Promise<{ free: true } | { free: false; code: string }> {
  return new Promise((done) => {
    const server = createServer();
    server.unref();
    server.once('error', (err: NodeJS.ErrnoException) => done({ free: false, code: err.code ?? 'EADDRINUSE' }));
    server.listen({ host, port, exclusive: true }, () => server.close(() => done({ free: true })));
  });
}

/** Two free ports near the configured ones, for the command a refusal suggests. */
export async function suggestPorts(host: string, web: number, backend: number): Promise<{ web: number; backend: number }> {
  for (let step = 10; step <= 100; step += 10) {
    const w = web + step;
    const b = backend + step;
    if (w === b || b > 65_535) break;
    if ((await portFree(host, w)).free && (await portFree(host, b)).free) return { web: w, backend: b };
  }
  return { web: web + 10, backend: backend + 10 };
}

const describeProcess = (p: PlatformProcess) => {
  const parts = [`pid ${p.pid}`];
  if (p.webPort !== null) parts.push(`web on port ${p.webPort}`);
  if (p.backendPort !== null) parts.push(`backend on port ${p.backendPort}`);
  parts.push(`started ${p.startedAt}`);
  return parts.join(', ');
};

/**
 * The command that starts a platform beside the running one: free ports, and with `dataDir` a
 * DATA_DIR of its own next to it (shown relative to `cwd` when it is below it).
 */
export function secondPlatformCommand(ports: { web: number; backend: number }, data?: { dataDir: string; cwd: string }): string {
  let dir = '';
  if (data) {
    const rel = relative(data.cwd, data.dataDir);
    const shown = rel && !rel.startsWith('..') ? `./${rel}` : data.dataDir;
    dir = `DATA_DIR=${shown.replace(/\/+$/, '')}2 `;
  }
  return `${dir}WEB_PORT=${ports.web} BACKEND_PORT=${ports.backend} npm start`;
}

/** The one line a start refused because another platform serves its DATA_DIR prints. */
export function refusedBesideLine(dataDir: string, other: PlatformProcess, why: string, command: string): string {
  const what = other.role === 'all' ? 'A platform' : `A platform ${other.role} process`;
  return (
    `${what} already runs on DATA_DIR ${dataDir} (${describeProcess(other)}) and this start would join it: ${why}. ` +
    `Nothing was started. Stop that one first (Ctrl-C in its terminal), or start a second platform with its own data and ports: ${command}`
  );
}

/** The one line a start refused because one of its ports is taken prints. */
export function refusedPortLine(setting: string, host: string, port: number, code: string, command: string): string {
  const reason =
    code === 'EADDRINUSE'
      ? 'is in use by another program (another platform with other data?)'
      : code === 'EACCES'
        ? 'may not be bound by this user'
        : `cannot be bound (${code})`;
  return `${setting} ${port} on ${host} ${reason}. Nothing was started. Free it, or choose other ports: ${command}`;
}
