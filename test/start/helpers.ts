/**
 * The platform as a real process, the way `npm start` runs it (the sources compiled by
 * scripts/build-server.ts into a scratch tree beside dist/, then `node <tree>/main.js`), for the
 * tests of test/start/. A started platform can be its own process group, as a terminal's
 * foreground job is, so a test sends a signal to the whole group exactly like Ctrl-C does.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { buildServer } from '../../scripts/build-server.ts';

export const ROOT = join(import.meta.dirname, '..', '..');

/** Compiles src/ into a scratch tree beside dist/ (same depth, so paths computed from import.meta.url resolve as in dist/). */
export function buildScratchServer(name: string): { main: string; out: string; built: { modules: number; files: number } } {
  const out = join(ROOT, `.dist-test-${name}-${process.pid}`);
  const built = buildServer(out);
  return { main: relative(ROOT, join(out, 'main.js')), out, built };
}

export type Started = {
  child: ChildProcess;
  exited: Promise<number | null>;
  output(): string;
};

const children: ChildProcess[] = [];
/** A process killLeftovers() kills if the test has not stopped it. */
export const trackChild = (child: ChildProcess) => void children.push(child);

/** `node <main> ...args` with a clean environment; `group`: its own process group (a terminal's job). */
export function startPlatform(main: string, args: string[], env: Record<string, string>, options: { group?: boolean } = {}): Started {
  const child = spawn(process.execPath, [main, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.group === true,
  });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ? -1 : code)));
  return { child, exited, output: () => output };
}

export async function waitFor(url: string, timeoutMs = 30_000): Promise<Response> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fetch(url);
    } catch (err) {
      if (Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

export async function eventually<T>(fn: () => Promise<T | null | undefined | false>, timeoutMs: number, stepMs = 100): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

export const isAlive = (pid: number | undefined): boolean => {
  if (!pid) return false;
  try {
    // a zombie (exited, not yet reaped) is gone for our purposes
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

/** The pid of the PostgreSQL server of an embedded cluster, when one runs. */
export function postgresPid(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    return isAlive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Agent processes the local driver's state files name (pid of the runtime), alive or not. */
export function agentPids(dataDir: string): Map<string, number> {
  const pids = new Map<string, number>();
  const root = join(dataDir, 'agents');
  if (!existsSync(root)) return pids;
  for (const id of readdirSync(root)) {
    try {
      pids.set(id, (JSON.parse(readFileSync(join(root, id, 'driver-state.json'), 'utf8')) as { pid: number }).pid);
    } catch {
      /* no state file */
    }
  }
  return pids;
}

/** The processes of a uid (a sandboxed agent's own user), from /proc. */
export function processesOfUid(uid: number): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, 'utf8');
      if (new RegExp(`^Uid:\\s+${uid}\\s`, 'm').test(status) && !/^State:\s+Z/m.test(status)) pids.push(Number(name));
    } catch {
      /* gone */
    }
  }
  return pids;
}

/** Processes whose command line names `dir` (the embedded PostgreSQL's `-D`, an agent's network helper). */
function processesNaming(dir: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(dir)) pids.push(Number(name));
    } catch {
      /* gone */
    }
  }
  return pids;
}

/** Kills what a failed test left behind: its platforms, their agents, their PostgreSQL servers and network helpers. */
export async function killLeftovers(dataDirs: string[]): Promise<void> {
  const killed: number[] = [];
  const kill = (pid: number | undefined) => {
    if (!pid || !isAlive(pid)) return;
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      /* gone */
    }
  };
  for (const c of children) if (c.exitCode === null && c.signalCode === null) kill(c.pid);
  for (const dir of dataDirs) for (const pid of [...agentPids(dir).values(), postgresPid(dir), ...processesNaming(dir)]) kill(pid);
  const until = Date.now() + 3_000;
  while (killed.some(isAlive) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  for (const dir of dataDirs) {
    // an agent's network namespace is a bind mount in its folder: unmounted, the folder can be removed
    const agents = join(dir, 'agents');
    for (const id of existsSync(agents) ? readdirSync(agents) : []) {
      for (const f of readdirSync(join(agents, id)).filter((n) => n.startsWith('netns-'))) spawnSync('umount', [join(agents, id, f)]);
    }
  }
}

export function removeTree(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** A signed-in client of the web app (cookie session). */
export function webClient(base: string) {
  let cookie = '';
  return async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { cookie, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const m = /service-session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '');
    if (m) cookie = `service-session=${m[1]}`;
    return { status: res.status, body: (await res.json().catch(() => ({}))) as Record<string, any> };
  };
}

/** A line of output that is a stack trace or a crash (pino JSON keeps a stack in "stack"). */
export const TROUBLE = /"stack"|\n\s+at \S+ \(|Unhandled 'error'|57P01|terminating connection|uncaught/i;
