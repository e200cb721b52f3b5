/**
 * Builds that programs use while they run, replaced without disturbing them (docs/configuration.md
 * "Starting and stopping"). `npm start` compiles the server to `dist` and the dashboard to
 * `dashboard/dist`; several starts in one checkout may run at once, and a process started earlier
 * keeps using what it runs from (the server tree: its agents' runtime is launched from it too).
 *
 * So every build goes into a folder of its own beside the name programs use, and that name is a
 * symbolic link switched to the new folder with rename(2), which replaces it in one step: a
 * reader finds the old build or the new one, never a half-written one, and never nothing. A build
 * whose inputs did not change is not made again. A lock (src/lib/host-lock.ts) lets one start
 * build while the others wait, then find it made. A folder the link no longer names is removed
 * once no running process has marked it in use (src/lib/code-tree.ts) and it has not been chosen
 * for KEEP_MS (a process that resolved the link just before it switched is still starting).
 *
 * Next to each folder `<folder>.json` records when it was last chosen and what it was built from
 * (not inside it: the web app serves every file of the dashboard's folder).
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { IN_USE_DIR } from '../../src/lib/code-tree.ts';
import { acquireHostLock } from '../../src/lib/host-lock.ts';

const KEEP_MS = 10 * 60_000;

export type BuildRecord = { chosenAt: string; inputsHash?: string; inputs?: string[] };

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Every file under `dir`, relative to `root`, sorted; `skip` drops a name (and what is under it). */
export function listFiles(root: string, dir: string, skip: (name: string) => boolean): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (skip(e.name)) continue;
      const full = join(d, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.isFile()) out.push(relative(root, full));
    }
  };
  walk(dir);
  return out.sort();
}

/** A short hash of the files (paths relative to `root`, and contents) and of `extra` strings. */
export function hashInputs(root: string, files: string[], extra: string[] = []): string {
  const h = createHash('sha256');
  for (const e of extra) h.update(`${e}\0`);
  for (const f of [...new Set(files)].sort()) {
    h.update(`${f}\0`);
    try {
      h.update(readFileSync(join(root, f)));
    } catch {
      h.update('\0(missing)');
    }
    h.update('\0');
  }
  return h.digest('hex').slice(0, 20);
}

export const readRecord = (dir: string): BuildRecord | undefined => {
  try {
    return JSON.parse(readFileSync(`${dir}.json`, 'utf8')) as BuildRecord;
  } catch {
    return undefined;
  }
};

/** The folder `link` names now, when it is a build of ours. */
export function currentBuild(link: string, prefix: string): string | undefined {
  try {
    const name = basename(readlinkSync(link));
    return name.startsWith(prefix) && existsSync(join(dirname(link), name)) ? join(dirname(link), name) : undefined;
  } catch {
    return undefined;
  }
}

/** Some process that runs from `dir` has marked it (src/lib/code-tree.ts) and still lives. */
export function markedInUse(dir: string): boolean {
  const marks = join(dir, IN_USE_DIR);
  if (!existsSync(marks)) return false;
  return readdirSync(marks).some((name) => /^\d+$/.test(name) && alive(Number(name)));
}

/** Points `link` at the folder `name` beside it, in one rename. A real folder there (an earlier layout) is moved aside first. */
function pointLink(link: string, name: string, prefix: string): void {
  try {
    if (readlinkSync(link) === name) return;
  } catch {
    /* no link yet, or a folder */
  }
  const tmp = `${link}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
  symlinkSync(name, tmp);
  try {
    if (lstatSync(link).isDirectory()) renameSync(link, join(dirname(link), `${prefix}earlier-${randomBytes(3).toString('hex')}`));
  } catch {
    /* nothing there */
  }
  renameSync(tmp, link);
}

function removeOldBuilds(parent: string, prefix: string, keep: string, inUse: (dir: string) => boolean, keepMs: number): void {
  for (const name of readdirSync(parent)) {
    if (!name.startsWith(prefix) || name.endsWith('.json')) continue;
    const dir = join(parent, name);
    if (dir === keep) continue;
    const staging = /\.tmp-(\d+)-/.exec(name);
    if (staging) {
      if (!alive(Number(staging[1]))) rmSync(dir, { recursive: true, force: true });
      continue;
    }
    if (inUse(dir)) continue;
    const chosenAt = Date.parse(readRecord(dir)?.chosenAt ?? '') || 0;
    if (Date.now() - chosenAt < keepMs) continue;
    rmSync(dir, { recursive: true, force: true });
    rmSync(`${dir}.json`, { force: true });
  }
}

/**
 * Makes `link` name an up-to-date build: the current one when `upToDate` says so, else a new
 * folder `<prefix><name>` (reused when it exists) filled by `build`. Returns the folder and
 * whether this call built it.
 */
export async function installBuild(options: {
  link: string;
  prefix: string;
  upToDate: (dir: string) => boolean;
  name: string;
  build: (dir: string) => Promise<Omit<BuildRecord, 'chosenAt'> | undefined> | Omit<BuildRecord, 'chosenAt'> | undefined;
  inUse?: (dir: string) => boolean;
  /** how long a folder no longer linked is kept after it was last chosen (tests) */
  keepMs?: number;
}): Promise<{ dir: string; built: boolean }> {
  const parent = dirname(options.link);
  const id = createHash('sha256')
    .update(join(realpathSync(parent), basename(options.link)))
    .digest('hex')
    .slice(0, 40);
  const lock = await acquireHostLock(`agent-platform-build-${id}`, `${options.link}.lock.sock`, {
    timeoutMs: 600_000,
    onTimeout: () => new Error(`another build of ${options.link} has held its lock for 10 minutes`),
  });
  try {
    const current = currentBuild(options.link, options.prefix);
    let dir = current && options.upToDate(current) ? current : join(parent, `${options.prefix}${options.name}`);
    let built = false;
    let record: Omit<BuildRecord, 'chosenAt'> = readRecord(dir) ?? {};
    if (!existsSync(dir) || !options.upToDate(dir)) {
      dir = existsSync(dir) ? `${dir}-${randomBytes(3).toString('hex')}` : dir;
      const staging = `${dir}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
      mkdirSync(staging, { recursive: true });
      try {
        record = (await options.build(staging)) ?? {};
        renameSync(staging, dir);
      } catch (err) {
        rmSync(staging, { recursive: true, force: true });
        throw err;
      }
      built = true;
    }
    writeFileSync(`${dir}.json`, `${JSON.stringify({ ...record, chosenAt: new Date().toISOString() })}\n`);
    pointLink(options.link, basename(dir), options.prefix);
    removeOldBuilds(parent, options.prefix, dir, options.inUse ?? (() => false), options.keepMs ?? KEEP_MS);
    return { dir, built };
  } finally {
    await lock.release();
  }
}
