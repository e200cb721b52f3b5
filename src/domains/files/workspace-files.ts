/**
 * §4.17 file explorer over one agent's workspace (docs/agents.md "File explorer"): tree, read,
 * write and git, confined to the workspace folder.
 *
 * Confinement, in this order, for every path a caller names:
 * 1. refused outright: empty, NUL bytes, absolute paths, backslashes, `..` segments, and
 *    percent-encoded separators or dots (a caller that encodes `/` or `.` twice is probing);
 * 2. the resolved path must lie under the workspace;
 * 3. the real path (symlinks resolved) of the target, or of its deepest existing ancestor when it
 *    does not exist yet, must lie under the real workspace: a symlink pointing outside is refused;
 * 4. writes open the file with O_NOFOLLOW, so a symlink swapped in at the last moment is not followed.
 * git runs with execFile (an argument array, no shell), a timeout and bounded output.
 */
import { execFile } from 'node:child_process';
import { constants, type Dirent } from 'node:fs';
import { lstat, mkdir, open, readdir, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { promisify } from 'node:util';
import { AppError, badRequest } from '../../lib/errors.ts';

const run = promisify(execFile);

/** §4.17: excluded from the tree */
export const EXCLUDED_DIRS = new Set(['node_modules', '.git', '.next', 'dist', 'build', '.cache', '__pycache__']);
/** §8 file explorer limits */
export const FILE_LIMITS = {
  readMaxBytes: 1024 * 1024,
  treeDepthDefault: 3,
  treeDepthMax: 4,
  gitLogDefault: 20,
  gitLogMax: 100,
  treeMaxEntries: 5000,
} as const;

export type TreeNode = { type: 'file' | 'folder'; name: string; path: string; children?: TreeNode[] };

const traversal = () => badRequest('Invalid path: it must be relative and stay inside the workspace');

function checkShape(p: string): string {
  if (typeof p !== 'string' || p.length === 0 || p.length > 4096) throw badRequest('path is required');
  if (p.includes('\0') || p.includes('\\') || isAbsolute(p) || /%(2e|2f|5c|00)/i.test(p)) throw traversal();
  const parts = p.split('/');
  if (parts.some((s) => s === '..')) throw traversal();
  return parts.filter((s) => s !== '' && s !== '.').join('/');
}

const inside = (root: string, p: string) => p === root || p.startsWith(root + sep);

export function createWorkspaceFiles(rootDir: string, options: { gitTimeoutMs?: number } = {}) {
  const gitTimeoutMs = options.gitTimeoutMs ?? 15_000;

  async function realRoot(): Promise<string> {
    try {
      return await realpath(rootDir);
    } catch {
      throw new AppError('NO_WORKSPACE', 'This agent has no workspace on this machine yet');
    }
  }

  /** Resolves a caller's relative path to an absolute one inside the workspace (rules 1-3). */
  async function resolveInside(p: string): Promise<{ root: string; abs: string; rel: string }> {
    const rel = checkShape(p);
    const root = await realRoot();
    const abs = resolve(root, rel);
    if (!inside(root, abs)) throw traversal();
    // the deepest existing ancestor (or the target itself) must really be inside
    let probe = abs;
    for (;;) {
      try {
        const real = await realpath(probe);
        if (!inside(root, real)) throw traversal();
        break;
      } catch (err) {
        if (err instanceof AppError) throw err;
        const parent = resolve(probe, '..');
        if (parent === probe || !inside(root, parent)) throw traversal();
        probe = parent;
      }
    }
    return { root, abs, rel };
  }

  async function git(root: string, args: string[]): Promise<string> {
    const { stdout } = await run('git', ['-c', 'safe.directory=*', '-c', 'core.quotepath=off', ...args], {
      cwd: root,
      timeout: gitTimeoutMs,
      maxBuffer: 4 * 1024 * 1024,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root, GIT_TERMINAL_PROMPT: '0', LANG: 'C' },
    });
    return stdout;
  }
  const isRepo = async (root: string) => {
    try {
      return (await git(root, ['rev-parse', '--is-inside-work-tree'])).trim() === 'true';
    } catch {
      return false;
    }
  };
  const gitFailed = (what: string, err: unknown) =>
    new AppError(
      'GIT_FAILED',
      `${what} failed: ${String((err as { stderr?: string }).stderr ?? (err as Error).message)
        .trim()
        .slice(0, 500)}`,
    );

  return {
    /** §4.17 GET /tree: folders first, then files, each alphabetical; excluded folders left out; symlinks are listed, never followed. */
    async tree(depth: number = FILE_LIMITS.treeDepthDefault) {
      const root = await realRoot();
      let count = 0;
      const walk = async (dir: string, name: string, level: number): Promise<TreeNode> => {
        const node: TreeNode = { type: 'folder', name, path: relative(root, dir).split(sep).join('/') };
        if (level >= depth) return node;
        let entries: Dirent[];
        try {
          entries = await readdir(dir, { withFileTypes: true });
        } catch {
          return node;
        }
        const folders = entries
          .filter((e) => e.isDirectory() && !EXCLUDED_DIRS.has(e.name))
          .map((e) => e.name)
          .sort();
        const files = entries
          .filter((e) => !e.isDirectory())
          .map((e) => e.name)
          .sort();
        node.children = [];
        for (const f of folders) {
          if (++count > FILE_LIMITS.treeMaxEntries) break;
          node.children.push(await walk(join(dir, f), f, level + 1));
        }
        for (const f of files) {
          if (++count > FILE_LIMITS.treeMaxEntries) break;
          node.children.push({ type: 'file', name: f, path: relative(root, join(dir, f)).split(sep).join('/') });
        }
        return node;
      };
      return { ok: true as const, root: await walk(root, '', 0) };
    },

    /** §4.17 GET /read */
    async read(p: string) {
      const { abs, rel } = await resolveInside(p);
      let st: Awaited<ReturnType<typeof stat>>;
      try {
        st = await stat(abs);
      } catch {
        throw badRequest('Not a file');
      }
      if (!st.isFile()) throw badRequest('Not a file');
      if (st.size > FILE_LIMITS.readMaxBytes) throw badRequest(`File is larger than ${FILE_LIMITS.readMaxBytes / 1024 / 1024} MB`);
      const fh = await open(abs, constants.O_RDONLY | constants.O_NOFOLLOW).catch(() => {
        throw traversal();
      });
      try {
        const content = await fh.readFile('utf8');
        return { ok: true as const, path: rel, content, size: st.size, modified: st.mtime.toISOString() };
      } finally {
        await fh.close();
      }
    },

    /** §4.17 POST /write: parent folders created */
    async write(p: string, content: string) {
      const { root, abs, rel } = await resolveInside(p);
      if (abs === root) throw badRequest('Not a file');
      const parent = resolve(abs, '..');
      await mkdir(parent, { recursive: true });
      // the folders just created are real folders, but check again: a symlink may have been raced in
      if (!inside(root, await realpath(parent))) throw traversal();
      const existing = await lstat(abs).catch(() => undefined);
      if (existing && !existing.isFile()) throw badRequest('Not a file');
      const fh = await open(abs, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o644).catch(() => {
        throw traversal();
      });
      try {
        await fh.writeFile(content, 'utf8');
      } finally {
        await fh.close();
      }
      return { ok: true as const, path: rel, size: Buffer.byteLength(content, 'utf8') };
    },

    /** §4.17 GET /git-status */
    async gitStatus() {
      const root = await realRoot();
      if (!(await isRepo(root))) return { ok: true as const, isGitRepo: false, branch: null, remote: null, changes: [], hasChanges: false };
      const branch = (await git(root, ['symbolic-ref', '--short', '-q', 'HEAD']).catch(() => '')).trim() || null;
      const remote = (await git(root, ['remote', 'get-url', 'origin']).catch(() => '')).trim() || null;
      const porcelain = await git(root, ['status', '--porcelain=v1', '-z']).catch((err) => {
        throw gitFailed('git status', err);
      });
      const changes = porcelain
        .split('\0')
        .filter((l) => l.length > 3)
        .map((l) => ({ status: l.slice(0, 2).trim(), path: l.slice(3) }));
      return { ok: true as const, isGitRepo: true, branch, remote, changes, hasChanges: changes.length > 0 };
    },

    /** §4.17 GET /git-diff */
    async gitDiff(p?: string) {
      const root = await realRoot();
      if (!(await isRepo(root))) throw new AppError('NOT_A_REPOSITORY', 'The workspace is not a git repository');
      const limit = p ? ['--', (await resolveInside(p)).rel] : [];
      const unstaged = await git(root, ['diff', ...limit]).catch((err) => {
        throw gitFailed('git diff', err);
      });
      const staged = await git(root, ['diff', '--cached', ...limit]).catch((err) => {
        throw gitFailed('git diff --cached', err);
      });
      return { ok: true as const, unstaged: unstaged || null, staged: staged || null };
    },

    /** §4.17 POST /git-sync: stage everything, commit, push when there is a remote */
    async gitSync(message = 'sync changes') {
      const root = await realRoot();
      if (!(await isRepo(root))) throw new AppError('NOT_A_REPOSITORY', 'The workspace is not a git repository');
      await git(root, ['add', '-A']).catch((err) => {
        throw gitFailed('Staging', err);
      });
      const pending = (await git(root, ['diff', '--cached', '--name-only'])).trim();
      let committed = false;
      if (pending) {
        await git(root, ['-c', 'user.name=Agent platform', '-c', 'user.email=agent@platform.invalid', 'commit', '-q', '-m', message]).catch(
          (err) => {
            throw gitFailed('Commit', err);
          },
        );
        committed = true;
      }
      const hash = (await git(root, ['rev-parse', 'HEAD']).catch(() => '')).trim() || null;
      let pushed = false;
      const remote = (await git(root, ['remote']).catch(() => '')).trim();
      if (remote)
        pushed = await git(root, ['push', '-q']).then(
          () => true,
          () => false,
        );
      return { ok: true as const, committed, pushed, hash, message };
    },

    /** §4.17 GET /git-log */
    async gitLog(limit: number = FILE_LIMITS.gitLogDefault) {
      const root = await realRoot();
      if (!(await isRepo(root))) return { ok: true as const, commits: [] };
      const out = await git(root, [
        'log',
        `-n${Math.min(limit, FILE_LIMITS.gitLogMax)}`,
        '--format=%H%x1f%h%x1f%s%x1f%an%x1f%aI%x1e',
      ]).catch(() => '');
      const commits = out
        .split('\x1e')
        .map((r) => r.trim())
        .filter(Boolean)
        .map((r) => {
          const [hash, shortHash, subject, author, date] = r.split('\x1f');
          return { hash: hash!, shortHash: shortHash!, subject: subject ?? '', author: author ?? '', date: date ?? '' };
        });
      return { ok: true as const, commits };
    },
  };
}

export type WorkspaceFiles = ReturnType<typeof createWorkspaceFiles>;
