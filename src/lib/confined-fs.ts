/**
 * Files inside a directory someone else controls (an agent's workspace), opened by the platform
 * without following a link on any component (docs/security.md "What the platform does in an
 * agent's directories").
 *
 * Node has no openat(2), so every step goes through `/proc/self/fd/<dirfd>/<name>`: the kernel
 * resolves `/proc/self/fd/<dirfd>` to the directory this process already holds open (by its inode,
 * not by its path) and looks `<name>` up inside it. Each component is opened with O_NOFOLLOW (a
 * symbolic link answers ELOOP instead of being followed) and O_DIRECTORY, and the previous
 * descriptor is only closed once the next one is held: renaming a folder or swapping a link in
 * while the walk runs cannot move it out of the tree (the race of finding N9, docs/security.md). The last component is
 * opened with O_NONBLOCK (a FIFO planted under a log's name cannot hang the platform) and must be a
 * regular file. With `owner`, every directory and file on the way must belong to that uid (the
 * agent's own user): a file the agent hard-linked from somewhere else, or that someone else left
 * there, is not opened. New folders and files are created with the caller's mode and handed to
 * `owner` with fchown on the descriptor (never chown on a path).
 */
import { constants, type Stats } from 'node:fs';
import { type FileHandle, mkdir, open, readdir } from 'node:fs/promises';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;

export type ConfinedErrorKind = 'missing' | 'link' | 'not-file' | 'not-directory' | 'owner' | 'name';

/** Why a confined open was refused; callers map it to their own answer (the explorer: 400). */
export class ConfinedPathError extends Error {
  override name = 'ConfinedPathError';
  readonly kind: ConfinedErrorKind;
  constructor(kind: ConfinedErrorKind, message: string) {
    super(message);
    this.kind = kind;
  }
}

export type Confinement = {
  /** the directory the walk starts from; its own path is trusted (its parents belong to the platform) */
  root: string;
  /** uid every component must belong to, and that new folders and files are given; undefined: not checked */
  owner?: number | undefined;
};

const at = (dir: FileHandle, name: string) => `/proc/self/fd/${dir.fd}/${name}`;

/** Linux's NAME_MAX: the longest name one path component may have, in bytes. */
export const NAME_MAX_BYTES = 255;

/** A name as messages show it: the agent chooses names, and a 4 KB one has no place in a log line. */
const shown = (name: string) => JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);

function checkName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0'))
    throw new ConfinedPathError('name', `Invalid path component ${shown(name)}`);
  if (Buffer.byteLength(name, 'utf8') > NAME_MAX_BYTES)
    throw new ConfinedPathError('name', `Path component ${shown(name)} is longer than ${NAME_MAX_BYTES} bytes`);
}

function refusal(err: unknown, name: string): ConfinedPathError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return new ConfinedPathError('missing', `${shown(name)} does not exist`);
  if (code === 'ELOOP') return new ConfinedPathError('link', `${shown(name)} is a symbolic link, which is never followed`);
  if (code === 'ENOTDIR') return new ConfinedPathError('not-directory', `${shown(name)} is not a folder`);
  // a name the filesystem refuses (too long for it): the caller's input, not a failure of ours
  if (code === 'ENAMETOOLONG' || code === 'EILSEQ')
    return new ConfinedPathError('name', `Path component ${shown(name)} is not a valid name here`);
  // a FIFO without a reader (O_NONBLOCK write), a device, a folder opened as a file
  if (code === 'ENXIO' || code === 'ENODEV' || code === 'EISDIR') return new ConfinedPathError('not-file', 'Not a file');
  throw err;
}

function checkOwner(c: Confinement, st: Stats, name: string): void {
  if (c.owner !== undefined && st.uid !== c.owner)
    throw new ConfinedPathError('owner', `${shown(name)} does not belong to the agent's user`);
}

async function openDirAt(c: Confinement, parent: FileHandle | undefined, name: string, create: boolean): Promise<FileHandle> {
  const path = parent ? at(parent, name) : c.root;
  let fh: FileHandle;
  try {
    fh = await open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  } catch (err) {
    if (!(create && parent && (err as NodeJS.ErrnoException).code === 'ENOENT')) throw refusal(err, name);
    try {
      await mkdir(path, { mode: 0o755 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw refusal(e, name);
    }
    try {
      fh = await open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    } catch (e) {
      throw refusal(e, name);
    }
    // ours if we just made it (still root's), the agent's otherwise: hand it over by descriptor
    const st = await fh.stat();
    if (c.owner !== undefined && st.uid !== c.owner && st.uid === process.getuid?.()) await fh.chown(c.owner, c.owner);
  }
  try {
    checkOwner(c, await fh.stat(), name || c.root);
  } catch (err) {
    await fh.close();
    throw err;
  }
  return fh;
}

/**
 * Opens the folder `parts` (already split, each a plain name) under `c.root`, component by
 * component; with `create`, missing folders are made. The caller closes the handle.
 */
export async function openConfinedDir(c: Confinement, parts: readonly string[], create = false): Promise<FileHandle> {
  let dir = await openDirAt(c, undefined, '', false);
  for (const name of parts) {
    try {
      checkName(name);
      const next = await openDirAt(c, dir, name, create);
      await dir.close();
      dir = next;
    } catch (err) {
      await dir.close();
      throw err;
    }
  }
  return dir;
}

/** Opens a regular file `parts` under `c.root` for reading; every component checked as above. */
export async function openConfinedFile(c: Confinement, parts: readonly string[]): Promise<{ fh: FileHandle; stat: Stats }> {
  if (parts.length === 0) throw new ConfinedPathError('not-file', 'Not a file');
  const name = parts[parts.length - 1]!;
  checkName(name);
  const dir = await openConfinedDir(c, parts.slice(0, -1));
  try {
    let fh: FileHandle;
    try {
      fh = await open(at(dir, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EISDIR') throw new ConfinedPathError('not-file', 'Not a file');
      throw refusal(err, name);
    }
    return await checkedFile(c, fh, name);
  } finally {
    await dir.close();
  }
}

async function checkedFile(c: Confinement, fh: FileHandle, name: string): Promise<{ fh: FileHandle; stat: Stats }> {
  try {
    const stat = await fh.stat();
    if (!stat.isFile()) throw new ConfinedPathError('not-file', 'Not a file');
    checkOwner(c, stat, name);
    return { fh, stat };
  } catch (err) {
    await fh.close();
    throw err;
  }
}

/**
 * Replaces the content of the regular file `parts` under `c.root` (creating it and its folders),
 * through descriptors only: no O_TRUNC before the checks, so a planted link or someone else's
 * file is refused untouched. Returns the bytes written.
 */
export async function writeConfinedFile(c: Confinement, parts: readonly string[], content: string | Buffer, mode = 0o644): Promise<number> {
  if (parts.length === 0) throw new ConfinedPathError('not-file', 'Not a file');
  const name = parts[parts.length - 1]!;
  checkName(name);
  const dir = await openConfinedDir(c, parts.slice(0, -1), true);
  let fh: FileHandle;
  try {
    let created = false;
    try {
      fh = await open(at(dir, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, mode);
      created = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw refusal(err, name);
      try {
        fh = await open(at(dir, name), O_WRONLY | O_NOFOLLOW | O_NONBLOCK);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EISDIR') throw new ConfinedPathError('not-file', 'Not a file');
        throw refusal(e, name);
      }
    }
    if (created && c.owner !== undefined && c.owner !== process.getuid?.()) await fh.chown(c.owner, c.owner);
  } finally {
    await dir.close();
  }
  const { fh: file } = await checkedFile(c, fh, name);
  try {
    const data = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    await file.truncate(0);
    await file.write(data, 0, data.length, 0);
    return data.length;
  } finally {
    await file.close();
  }
}

/** Entries of the folder `parts` under `c.root`, with their types as stored (links are not followed). */
export async function listConfinedDir(c: Confinement, parts: readonly string[]) {
  const dir = await openConfinedDir(c, parts);
  try {
    return await readdir(`/proc/self/fd/${dir.fd}`, { withFileTypes: true });
  } finally {
    await dir.close();
  }
}

/** The last `maxBytes` of a confined file as complete lines (a missing or refused file is no lines). */
export async function tailConfinedLines(c: Confinement, parts: readonly string[], maxBytes = 1024 * 1024): Promise<string[]> {
  let opened: { fh: FileHandle; stat: Stats };
  try {
    opened = await openConfinedFile(c, parts);
  } catch (err) {
    if (err instanceof ConfinedPathError) return [];
    throw err;
  }
  const { fh, stat } = opened;
  try {
    const start = Math.max(0, stat.size - maxBytes);
    const buf = Buffer.alloc(stat.size - start);
    const { bytesRead } = await fh.read(buf, 0, buf.length, start);
    const lines = buf.subarray(0, bytesRead).toString('utf8').split('\n');
    if (start > 0) lines.shift(); // partial first line
    return lines.filter((l) => l.trim() !== '');
  } finally {
    await fh.close();
  }
}

/**
 * At most `maxBytes` of an open file, read from its start with read(2) until end of file, or
 * undefined when it holds more. The size an fstat gave is a guess, never the bound: the agent can
 * grow the file (ftruncate to 400 MB, sparse) between that fstat and the read, and a read "to the
 * size" (`readFile`, which fstat's again) would then take all of it (docs/agents.md "File explorer"). So no
 * more than `maxBytes + 1` bytes are ever asked for: getting the extra byte is the refusal.
 * `sizeHint` (the fstat's size) only picks the first buffer, so a small file costs a small one.
 */
export async function readBounded(fh: FileHandle, maxBytes: number, sizeHint = 0): Promise<Buffer | undefined> {
  const cap = maxBytes + 1;
  let buf = Buffer.allocUnsafe(Math.min(cap, Math.max(Math.min(sizeHint, maxBytes) + 1, 16 * 1024)));
  let filled = 0;
  for (;;) {
    if (filled === buf.length) {
      if (buf.length === cap) break;
      const bigger = Buffer.allocUnsafe(Math.min(cap, buf.length * 2));
      buf.copy(bigger, 0, 0, filled);
      buf = bigger;
    }
    const { bytesRead } = await fh.read(buf, filled, buf.length - filled, filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return filled > maxBytes ? undefined : buf.subarray(0, filled);
}

/** A small confined file as text (at most `maxBytes`), or undefined when it is missing, refused or larger. */
export async function readConfinedText(c: Confinement, parts: readonly string[], maxBytes = 1024 * 1024): Promise<string | undefined> {
  let opened: { fh: FileHandle; stat: Stats };
  try {
    opened = await openConfinedFile(c, parts);
  } catch (err) {
    if (err instanceof ConfinedPathError) return undefined;
    throw err;
  }
  try {
    if (opened.stat.size > maxBytes) return undefined; // plainly too large: not even the first buffer
    return (await readBounded(opened.fh, maxBytes, opened.stat.size))?.toString('utf8');
  } finally {
    await opened.fh.close();
  }
}
