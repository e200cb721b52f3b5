/**
 * §4.17 file explorer over one agent's workspace (docs/agents.md "File explorer", docs/security.md
 * "What the platform does in an agent's directories"): tree, read, write and git.
 *
 * The workspace is the agent's: anything in it may be a link, a FIFO, a hard link or a folder
 * swapped while we look. So:
 * 1. a caller's path is refused outright when empty, with NUL bytes, absolute, with backslashes,
 *    `..` segments, or percent-encoded separators or dots (a caller that encodes `/` twice is probing);
 * 2. every file and folder is opened through descriptors from the workspace down, one component at
 *    a time, never following a link, each of them the agent's own (src/lib/confined-fs.ts): no
 *    realpath-then-open window (docs/security.md N9), no file of another user;
 * 3. git runs as the agent, inside its sandbox, with only the workspace visible (the driver's
 *    `run`; docs/security.md N1): a workspace's hooks, fsmonitor, filters or config run with the agent's rights
 *    or not at all. Without a sandbox the git routes answer 503 rather than run git as the platform.
 */
import type { Dirent } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { isAbsolute } from 'node:path';
import {
  ConfinedPathError,
  type Confinement,
  listConfinedDir,
  NAME_MAX_BYTES,
  openConfinedFile,
  readBounded,
  writeConfinedFile,
} from '../../lib/confined-fs.ts';
import { AppError, badRequest } from '../../lib/errors.ts';
import type { AgentWorkspace } from '../agents/index.ts';

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

/**
 * What "Initialise a repository" puts in a new repository's .gitignore (docs/agents.md "File
 * explorer"): the runtime's logs and its configuration (openclaw.json, which names host paths of the
 * workspace) are the platform's bookkeeping, not the agent's work, so "Commit all changes" leaves
 * them out; node_modules is what every project ignores. An existing .gitignore is kept as it is.
 */
export const GITIGNORE_ON_INIT = [
  '# written by the platform when the repository was initialised from the file explorer',
  'logs/',
  'openclaw.json',
  'node_modules/',
  '',
].join('\n');

/** Linux's PATH_MAX less its NUL: the longest path the kernel takes, in bytes. */
const PATH_MAX_BYTES = 4095;

function checkShape(p: string | undefined): string {
  if (typeof p !== 'string' || p.length === 0) throw badRequest('path is required');
  // limits in bytes, as the kernel counts them (a name of combining marks is short in UTF-16 units
  // and long in UTF-8): refused here with a sentence rather than by open() with ENAMETOOLONG
  if (Buffer.byteLength(p, 'utf8') > PATH_MAX_BYTES) throw badRequest(`Invalid path: longer than ${PATH_MAX_BYTES} bytes`);
  if (p.includes('\0') || p.includes('\\') || isAbsolute(p) || /%(2e|2f|5c|00)/i.test(p)) throw traversal();
  const parts = p.split('/');
  if (parts.some((s) => s === '..')) throw traversal();
  if (parts.some((s) => Buffer.byteLength(s, 'utf8') > NAME_MAX_BYTES))
    throw badRequest(`Invalid path: a file or folder name is longer than ${NAME_MAX_BYTES} bytes`);
  return parts.filter((s) => s !== '' && s !== '.').join('/');
}

const parts = (rel: string) => (rel === '' ? [] : rel.split('/'));

/** A refused confined open, as the explorer answers it (400, nothing touched). */
function refused(err: unknown): never {
  if (err instanceof ConfinedPathError) {
    if (err.kind === 'link') throw badRequest('Invalid path: a symbolic link is never followed');
    if (err.kind === 'owner') throw badRequest("Refused: this file does not belong to the agent's user");
    // checkShape refused `..`, NUL and over-long names already: what is left is a name this filesystem refuses
    if (err.kind === 'name') throw badRequest('Invalid path: a name this filesystem does not accept');
    throw badRequest('Not a file');
  }
  throw err;
}

export function createWorkspaceFiles(workspace: AgentWorkspace, options: { gitTimeoutMs?: number } = {}) {
  const gitTimeoutMs = options.gitTimeoutMs ?? 15_000;
  const c: Confinement = { root: workspace.dir, owner: workspace.owner };

  /** The workspace must exist (an agent never started here has none). */
  async function checkRoot(): Promise<void> {
    try {
      await lstat(workspace.dir);
    } catch {
      throw new AppError('NO_WORKSPACE', 'This agent has no workspace on this machine yet');
    }
  }

  /**
   * Over its disk quota (docs/agents.md "Disk"), the workspace takes only writes that make an
   * existing file no larger: the owner can still empty files to get back under, never add.
   */
  async function checkQuota(rel: string, bytes: number): Promise<void> {
    const usage = await workspace.diskUsage?.();
    if (!usage?.over) return;
    const existing = await openConfinedFile(c, parts(rel)).then(
      async ({ fh, stat }) => {
        await fh.close();
        return stat.size;
      },
      (err: unknown) => {
        if (err instanceof ConfinedPathError && err.kind === 'missing') return undefined;
        return refused(err);
      },
    );
    if (existing !== undefined && bytes <= existing) return;
    const used = usage.usedBytes === null ? 'could not be measured' : `uses ${Math.ceil(usage.usedBytes / 1024 / 1024)} MB`;
    throw new AppError(
      'CONFLICT',
      `The agent's workspace ${used} of its ${Math.round(usage.quotaBytes / 1024 / 1024)} MB disk quota: only a write that makes a file smaller is accepted until files are removed`,
    );
  }

  /** The sandboxed runner, or the 503: without a sandbox git would run with the platform's rights. */
  function runner(): NonNullable<AgentWorkspace['run']> {
    if (!workspace.run)
      throw new AppError(
        'GIT_UNAVAILABLE',
        "git in the file explorer needs the agent sandbox (bubblewrap): without it git would run with the platform's rights in a folder the agent controls",
      );
    return workspace.run;
  }

  async function git(args: string[]): Promise<string> {
    const run = runner();
    await checkRoot();
    // the agent's own rights, but still no hooks or fsmonitor of its repository: what the explorer
    // shows must not depend on a program the agent planted
    return run(
      'git',
      ['-c', 'core.quotepath=off', '-c', 'core.fsmonitor=false', '-c', 'core.hooksPath=/dev/null', '-c', 'core.pager=cat', ...args],
      {
        env: {
          PATH: '/usr/bin:/bin',
          GIT_TERMINAL_PROMPT: '0',
          GIT_CONFIG_NOSYSTEM: '1',
          GIT_CONFIG_GLOBAL: '/dev/null',
          GIT_OPTIONAL_LOCKS: '0',
          LANG: 'C',
        },
        timeoutMs: gitTimeoutMs,
        maxBuffer: 4 * 1024 * 1024,
      },
    );
  }
  const isRepo = async () => {
    runner(); // a missing sandbox is the 503, not "not a repository"
    try {
      return (await git(['rev-parse', '--is-inside-work-tree'])).trim() === 'true';
    } catch {
      return false;
    }
  };
  const gitFailed = (what: string, err: unknown) =>
    new AppError(
      'GIT_FAILED',
      `${what} failed: ${String((err as { stderr?: string }).stderr || (err as Error).message)
        .trim()
        .slice(0, 500)}`,
    );

  /** §4.17 GET /git-status */
  async function gitStatus() {
    if (!(await isRepo())) return { ok: true as const, isGitRepo: false, branch: null, remote: null, changes: [], hasChanges: false };
    const branch = (await git(['symbolic-ref', '--short', '-q', 'HEAD']).catch(() => '')).trim() || null;
    const remote = (await git(['remote', 'get-url', 'origin']).catch(() => '')).trim() || null;
    const porcelain = await git(['status', '--porcelain=v1', '-z']).catch((err) => {
      throw gitFailed('git status', err);
    });
    const changes = porcelain
      .split('\0')
      .filter((l) => l.length > 3)
      .map((l) => ({ status: l.slice(0, 2).trim(), path: l.slice(3) }));
    return { ok: true as const, isGitRepo: true, branch, remote, changes, hasChanges: changes.length > 0 };
  }

  /** Commits what is staged, as the platform (never the owner's or the agent's identity, nor a signing key). */
  async function commit(message: string, extra: string[] = []) {
    await git([
      '-c',
      'user.name=Agent platform',
      '-c',
      'user.email=agent@platform.invalid',
      '-c',
      'commit.gpgSign=false',
      'commit',
      '-q',
      ...extra,
      '-m',
      message,
    ]).catch((err) => {
      throw gitFailed('Commit', err);
    });
  }

  /** The repository's first commit, of everything not ignored (empty when that is nothing), unless it has one. */
  async function commitFirst(message: string) {
    const hasHead = await git(['rev-parse', '--verify', '-q', 'HEAD']).then(
      () => true,
      () => false,
    );
    if (hasHead) return;
    await git(['add', '-A']).catch((err) => {
      throw gitFailed('Staging', err);
    });
    await commit(message, ['--allow-empty']);
  }

  return {
    /** §4.17 GET /tree: folders first, then files, each alphabetical; excluded folders left out; symlinks are listed, never followed. */
    async tree(requested: number = FILE_LIMITS.treeDepthDefault) {
      const depth = Math.min(requested, FILE_LIMITS.treeDepthMax); // §4.17 "cap 4"
      await checkRoot();
      let count = 0;
      const walk = async (path: string[], name: string, level: number): Promise<TreeNode> => {
        const node: TreeNode = { type: 'folder', name, path: path.join('/') };
        if (level >= depth) return node;
        let entries: Dirent[];
        try {
          entries = await listConfinedDir(c, path);
        } catch (err) {
          if (err instanceof ConfinedPathError) return node; // swapped for a link, or not the agent's: listed, not entered
          throw err;
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
          node.children.push(await walk([...path, f], f, level + 1));
        }
        for (const f of files) {
          if (++count > FILE_LIMITS.treeMaxEntries) break;
          node.children.push({ type: 'file', name: f, path: [...path, f].join('/') });
        }
        return node;
      };
      return { ok: true as const, root: await walk([], '', 0) };
    },

    /** §4.17 GET /read */
    async read(p: string | undefined) {
      const rel = checkShape(p);
      await checkRoot();
      const { fh, stat } = await openConfinedFile(c, parts(rel)).catch(refused);
      const tooLarge = () => badRequest(`File is larger than ${FILE_LIMITS.readMaxBytes / 1024 / 1024} MB`);
      try {
        if (stat.size > FILE_LIMITS.readMaxBytes) throw tooLarge();
        // the fstat above is only a first answer: the agent may grow the file before it is read
        // (docs/agents.md "File explorer"), so the read itself stops one byte past the limit
        const data = await readBounded(fh, FILE_LIMITS.readMaxBytes, stat.size);
        if (!data) throw tooLarge();
        return { ok: true as const, path: rel, content: data.toString('utf8'), size: data.length, modified: stat.mtime.toISOString() };
      } finally {
        await fh.close();
      }
    },

    /** §4.17 POST /write: parent folders created (the agent's, like the file) */
    async write(p: string | undefined, content: string) {
      const rel = checkShape(p);
      if (rel === '') throw badRequest('Not a file');
      await checkRoot();
      await checkQuota(rel, Buffer.byteLength(content, 'utf8'));
      const size = await writeConfinedFile(c, parts(rel), content).catch(refused);
      return { ok: true as const, path: rel, size };
    },

    /** §4.17 GET /git-status */
    gitStatus,

    /**
     * POST /git-init (docs/agents.md "File explorer"): makes the workspace a repository (branch
     * `main`), as the agent inside its sandbox, with a .gitignore for the platform's bookkeeping
     * when it has none. A workspace that is one already is left as it is. Answers the status after,
     * with `initialized` true when this call made it one.
     *
     * `initialCommit` (provisioning's `gitInit`, docs/agents.md "A repository from the start"):
     * then a repository without a commit yet gets one of everything not ignored, by the platform,
     * so the agent's history starts from what it was provisioned with. A retried job finds the
     * repository made and commits only when no commit exists.
     */
    async gitInit(options: { initialCommit?: string } = {}) {
      if (await isRepo()) {
        if (options.initialCommit) await commitFirst(options.initialCommit);
        return { ...(await gitStatus()), initialized: false };
      }
      const hasIgnore = await openConfinedFile(c, ['.gitignore']).then(
        async ({ fh }) => {
          await fh.close();
          return true;
        },
        (err: unknown) => {
          if (err instanceof ConfinedPathError && err.kind === 'missing') return false;
          return refused(err);
        },
      );
      if (!hasIgnore) await checkQuota('.gitignore', Buffer.byteLength(GITIGNORE_ON_INIT));
      await git(['-c', 'init.defaultBranch=main', 'init', '-q']).catch((err) => {
        throw gitFailed('git init', err);
      });
      if (!hasIgnore) await writeConfinedFile(c, ['.gitignore'], GITIGNORE_ON_INIT).catch(refused);
      if (options.initialCommit) await commitFirst(options.initialCommit);
      return { ...(await gitStatus()), initialized: true };
    },

    /** §4.17 GET /git-diff */
    async gitDiff(p?: string) {
      // the path only names what to diff, inside git's own view of the workspace (run in the sandbox)
      const limit = p ? ['--', checkShape(p)] : [];
      if (!(await isRepo())) throw new AppError('NOT_A_REPOSITORY', 'The workspace is not a git repository');
      const unstaged = await git(['diff', '--no-ext-diff', '--no-textconv', ...limit]).catch((err) => {
        throw gitFailed('git diff', err);
      });
      const staged = await git(['diff', '--no-ext-diff', '--no-textconv', '--cached', ...limit]).catch((err) => {
        throw gitFailed('git diff --cached', err);
      });
      return { ok: true as const, unstaged: unstaged || null, staged: staged || null };
    },

    /** §4.17 POST /git-sync: stage everything, commit, push when there is a remote */
    async gitSync(message = 'sync changes') {
      if (!(await isRepo())) throw new AppError('NOT_A_REPOSITORY', 'The workspace is not a git repository');
      await git(['add', '-A']).catch((err) => {
        throw gitFailed('Staging', err);
      });
      const pending = (await git(['diff', '--cached', '--name-only'])).trim();
      let committed = false;
      if (pending) {
        await commit(message);
        committed = true;
      }
      const hash = (await git(['rev-parse', 'HEAD']).catch(() => '')).trim() || null;
      let pushed = false;
      const remote = (await git(['remote']).catch(() => '')).trim();
      if (remote)
        pushed = await git(['push', '-q']).then(
          () => true,
          () => false,
        );
      return { ok: true as const, committed, pushed, hash, message };
    },

    /** §4.17 GET /git-log */
    async gitLog(limit: number = FILE_LIMITS.gitLogDefault) {
      if (!(await isRepo())) return { ok: true as const, commits: [] };
      const out = await git(['log', `-n${Math.min(limit, FILE_LIMITS.gitLogMax)}`, '--format=%H%x1f%h%x1f%s%x1f%an%x1f%aI%x1e']).catch(
        () => '',
      );
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
