/**
 * The services the load and fault benches run the platform on, all their own so a fault they cause
 * touches nobody else: an embedded PostgreSQL server on a fixed free port (killed and started
 * again on the same port and data), a `redis-server` without persistence, and the platform itself
 * as child processes (`node src/main.ts`, or `dist/main.js` with BENCH_PLATFORM_ENTRY) connecting
 * to them through DATABASE_URL / DATABASE_REQUEST_URL / REDIS_URL, as a production deployment does.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { ensureOwnerRole } from '../../src/db/roles.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export type OwnPostgres = {
  /** superuser: the bench's own checks read the tables with it (no row-level security) */
  superuserUrl: string;
  ownerUrl: string;
  requestUrl: string;
  /** SIGKILL of the postmaster (a crash, no shutdown checkpoint), waiting until no server process is left */
  kill(): Promise<void>;
  /** starts the server again on the same port and data (crash recovery runs in PostgreSQL) */
  start(): Promise<void>;
  stop(): Promise<void>;
};

export async function startOwnPostgres(dir: string): Promise<OwnPostgres> {
  const dataDir = join(dir, 'pg-data');
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const password = 'bench-superuser';
  let server = await startEmbeddedPostgres({ dataDir, password, port });
  const roles = await ensureOwnerRole(server.url, 'bench-owner', 'bench-request');
  const postmasterPid = () => Number(readFileSync(join(server.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const serverPids = () => {
    const pm = postmasterPid();
    const out = new Set<number>([pm]);
    // the backends are the postmaster's children; after a SIGKILL they notice and exit on their own
    try {
      for (const line of readFileSync(`/proc/${pm}/task/${pm}/children`, 'utf8').trim().split(/\s+/)) if (line) out.add(Number(line));
    } catch {
      /* gone */
    }
    return [...out];
  };
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
      return state !== 'Z' && state !== 'X';
    } catch {
      return false;
    }
  };
  return {
    superuserUrl: server.url,
    ownerUrl: roles.ownerUrl,
    requestUrl: roles.requestUrl,
    async kill() {
      const pids = serverPids();
      process.kill(pids[0]!, 'SIGKILL');
      const deadline = Date.now() + 20_000;
      while (pids.some(alive) && Date.now() < deadline) await sleep(20);
    },
    async start() {
      // a new postmaster refuses while an old backend still holds the shared memory: retry briefly
      for (let i = 0; ; i++) {
        try {
          server = await startEmbeddedPostgres({ dataDir, password, port });
          return;
        } catch (err) {
          if (i >= 50) throw err;
          await sleep(100);
        }
      }
    },
    stop: () => server.stop(),
  };
}

export type OwnRedis = { url: string; stop(): Promise<void>; start(): Promise<void> };

/** the redis-server binary (BENCH_REDIS_SERVER: another path or build) */
const REDIS_SERVER = process.env.BENCH_REDIS_SERVER ?? 'redis-server';

export async function startOwnRedis(dir: string): Promise<OwnRedis> {
  const port = await freePort();
  let proc: ChildProcess | undefined;
  const start = async () => {
    const log = openSync(join(dir, 'redis.log'), 'a');
    proc = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', log, log],
    });
    for (let i = 0; i < 200; i++) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited (${proc.exitCode}); see ${join(dir, 'redis.log')}`);
      if (await ping(port)) return;
      await sleep(25);
    }
    throw new Error('redis-server did not answer PING within 5 s');
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    start,
    stop: async () => {
      const p = proc;
      if (!p || p.exitCode !== null || p.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        p.once('exit', () => resolve());
        p.kill('SIGKILL');
      });
    },
  };
}

async function ping(port: number): Promise<boolean> {
  const { createConnection } = await import('node:net');
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.setTimeout(500);
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => {
      s.destroy();
      resolve(d.toString().startsWith('+PONG'));
    });
    s.on('error', () => resolve(false));
    s.on('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

export type PlatformProcess = {
  proc: ChildProcess;
  pid: number;
  /** resident memory of the process in MB, from /proc */
  rssMb(): number | undefined;
  /** stops it (SIGTERM, then SIGKILL after 30 s) and waits */
  stop(signal?: NodeJS.Signals): Promise<void>;
};

const ENTRY = process.env.BENCH_PLATFORM_ENTRY ?? join(ROOT, 'src', 'main.ts');

/**
 * Starts `node <entry> <app>` with `env` on top of a clean environment (no operator settings leak
 * in), its log in `logFile`, and waits until `readyUrl` answers 200.
 */
export async function startPlatform(opts: {
  app: 'all' | 'web' | 'backend';
  env: Record<string, string>;
  logFile: string;
  readyUrl: string;
  timeoutMs?: number;
}): Promise<PlatformProcess> {
  const log = openSync(opts.logFile, 'a');
  const proc = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', ENTRY, opts.app], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', LOG_FORMAT: 'json', ...opts.env },
    stdio: ['ignore', log, log],
  });
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null)
      throw new Error(`platform (${opts.app}) exited (${proc.exitCode ?? proc.signalCode}); log: ${tail(opts.logFile)}`);
    try {
      const res = await fetch(opts.readyUrl, { signal: AbortSignal.timeout(2_000) });
      await res.text();
      if (res.status === 200) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`platform (${opts.app}) not ready at ${opts.readyUrl}; log: ${tail(opts.logFile)}`);
    }
    await sleep(200);
  }
  const pid = proc.pid!;
  return {
    proc,
    pid,
    rssMb() {
      try {
        const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
        return m ? Number(m[1]) / 1024 : undefined;
      } catch {
        return undefined;
      }
    },
    stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const force = setTimeout(() => proc.kill('SIGKILL'), 30_000);
        proc.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        proc.kill(signal);
      });
    },
  };
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-5).join('\n');
  } catch {
    return '(no log)';
  }
}

/** A temporary folder the embedded PostgreSQL's OS user can reach (as bench-db.ts makes them). */
export function benchDir(prefix: string): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  chmodSync(dir, 0o755);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
