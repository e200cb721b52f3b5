/**
 * Where the embedded PostgreSQL server runs (embedded.ts starts it): as which OS user (root is
 * refused by PostgreSQL, so the `postgres` user), from which binaries that user can reach, and in
 * which cluster folder. Nothing here loosens the permissions of the operator's folders.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { arch, platform } from 'node:os';
import { join } from 'node:path';

/** A start-up failure with one line for the operator (main.ts prints only the message). */
export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

export type RunAs = { uid: number; gid: number } | undefined;

/** As root: the `postgres` OS user (created when missing); otherwise the current user. */
export function runAsUser(): RunAs {
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
export function reachableBinaries(user: RunAs, nativeDir: string, version: string, cacheRoots: string[]): string {
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
export function clusterDir(user: RunAs, dataDir: string, dataRoots: string[], log?: (line: string) => void): string {
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

export function run(cmd: string, args: string[], user: RunAs, env: NodeJS.ProcessEnv): Promise<string> {
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
