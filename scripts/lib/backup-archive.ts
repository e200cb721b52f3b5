/**
 * The backup archive of scripts/backup.ts and scripts/restore.ts (docs/production.md "Backups"):
 * a gzip-compressed tar (tar-stream over node:zlib) holding
 *   manifest.json       what the archive is (format, version, when, which database)
 *   pg/                 the embedded PostgreSQL cluster: an online base backup with its backup_label
 *                       and the WAL written while it was copied (absent with DATABASE_URL)
 *   secrets.json        DATA_DIR/secrets.json: generated keys and the embedded database's passwords
 *   agents/<id>/workspace/, agents/<id>/home/   the local driver's agent folders
 * Trees are read through src/lib/confined-fs.ts: an agent's folder is its own, and a link or a
 * folder it swaps in while the copy runs must not make the backup read a file outside it.
 */
import { once } from 'node:events';
import { createReadStream, createWriteStream, type Stats } from 'node:fs';
import { type FileHandle, readlink } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { ConfinedPathError, type Confinement, listConfinedDir, openConfinedDir, openConfinedFile } from '../../src/lib/confined-fs.ts';

export const FORMAT = 'agent-platform-backup';
export const VERSION = 1;

export type Manifest = {
  format: typeof FORMAT;
  version: number;
  createdAt: string;
  /** embedded: pg/ holds the cluster; external: the database was DATABASE_URL's, backed up by its operator */
  database: 'embedded' | 'external';
  postgresVersion?: string;
  /** the WAL positions of the base backup (pg_backup_start, pg_backup_stop) */
  walStart?: string;
  walStop?: string;
};

/** A tar.gz being written: entries are added one after another. */
export function createArchiveWriter(file: string) {
  const pack = tar.pack();
  const written = pipeline(pack, createGzip(), createWriteStream(file, { mode: 0o600, flags: 'wx' }));
  let count = 0;
  const header = (name: string, st: Pick<Stats, 'mode' | 'uid' | 'gid' | 'mtime'>) => ({
    name,
    mode: st.mode & 0o7777,
    uid: st.uid,
    gid: st.gid,
    mtime: st.mtime,
  });

  const writer = {
    get entries() {
      return count;
    },
    async addBuffer(name: string, content: Buffer | string, mode = 0o600): Promise<void> {
      count++;
      await new Promise<void>((done, fail) =>
        pack.entry({ name, mode, mtime: new Date() }, typeof content === 'string' ? Buffer.from(content) : content, (err) =>
          err ? fail(err) : done(),
        ),
      );
    },
    async addDir(name: string, st: Stats): Promise<void> {
      count++;
      await new Promise<void>((done, fail) => pack.entry({ ...header(name, st), type: 'directory' }, (err) => (err ? fail(err) : done())));
    },
    async addSymlink(name: string, target: string, st: Stats): Promise<void> {
      count++;
      await new Promise<void>((done, fail) =>
        pack.entry({ ...header(name, st), type: 'symlink', linkname: target }, (err) => (err ? fail(err) : done())),
      );
    },
    /**
     * A file of `size` bytes from an open handle. A database file may shrink while it is copied
     * (a relation truncated): the rest is zeros, as in PostgreSQL's own base backups, and replaying
     * the WAL puts it right.
     */
    async addOpenFile(name: string, fh: FileHandle, st: Stats): Promise<void> {
      count++;
      let entry!: Writable;
      const done = new Promise<void>((resolve, reject) => {
        // a streamx Writable: write, 'drain' and end as Node's
        entry = pack.entry({ ...header(name, st), size: st.size }, (err) => (err ? reject(err) : resolve())) as unknown as Writable;
      });
      let left = st.size;
      while (left > 0) {
        // a buffer per chunk: the archive holds on to what it was given until it is compressed
        const chunk = Buffer.allocUnsafe(Math.min(left, 1 << 20));
        const { bytesRead } = await fh.read(chunk, 0, chunk.length, st.size - left);
        if (bytesRead === 0) break;
        left -= bytesRead;
        if (!entry.write(chunk.subarray(0, bytesRead))) await once(entry, 'drain');
      }
      if (left > 0) entry.write(Buffer.alloc(left));
      entry.end();
      await done;
    },
    /** The regular file `parts` under `c.root` (confined: no link followed) as `name`; false when it is not there. */
    async addConfinedFile(name: string, c: Confinement, parts: string[]): Promise<boolean> {
      let opened: Awaited<ReturnType<typeof openConfinedFile>>;
      try {
        opened = await openConfinedFile(c, parts);
      } catch (err) {
        if (err instanceof ConfinedPathError) return false;
        throw err;
      }
      try {
        await writer.addOpenFile(name, opened.fh, opened.stat);
      } finally {
        await opened.fh.close();
      }
      return true;
    },
    /**
     * Every folder, file and link under `c.root` as `prefix/…`, never following a link; sockets,
     * FIFOs and devices are left out, and so is what `skip(relative path)` names. A file that goes
     * away while the copy runs is left out too.
     */
    async addTree(prefix: string, c: Confinement, skip: (rel: string, isDir: boolean) => boolean = () => false): Promise<void> {
      const walk = async (parts: string[]): Promise<void> => {
        let dir: Awaited<ReturnType<typeof openConfinedDir>>;
        try {
          dir = await openConfinedDir(c, parts);
        } catch (err) {
          if (err instanceof ConfinedPathError) return; // gone, or no longer a folder of the tree
          throw err;
        }
        try {
          await writer.addDir([prefix, ...parts].join('/'), await dir.stat());
        } finally {
          await dir.close();
        }
        let entries: Awaited<ReturnType<typeof listConfinedDir>>;
        try {
          entries = await listConfinedDir(c, parts);
        } catch (err) {
          if (err instanceof ConfinedPathError) return;
          throw err;
        }
        for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
          const rel = [...parts, e.name];
          if (skip(rel.join('/'), e.isDirectory())) continue;
          const name = [prefix, ...rel].join('/');
          if (e.isDirectory()) await walk(rel);
          else if (e.isSymbolicLink()) {
            const parent = await openConfinedDir(c, parts).catch(() => undefined);
            if (!parent) continue;
            try {
              const path = `/proc/self/fd/${parent.fd}/${e.name}`;
              const [target, st] = await Promise.all([readlink(path), parent.stat()]);
              await writer.addSymlink(name, target, st);
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && (err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
            } finally {
              await parent.close();
            }
          } else if (e.isFile()) await writer.addConfinedFile(name, c, rel);
        }
      };
      await walk([]);
    },
    /** Ends the archive and waits until the file is written. */
    async finish(): Promise<void> {
      pack.finalize();
      await written;
    },
    /** Stops writing (the caller removes the file). */
    async abort(): Promise<void> {
      pack.destroy();
      await written.catch(() => undefined);
    },
  };
  return writer;
}

export type ArchiveEntry = {
  /** the entry's path inside the archive, checked: relative, no `.` or `..` component */
  name: string;
  type: 'file' | 'directory' | 'symlink';
  mode: number;
  uid: number;
  gid: number;
  mtime: Date;
  linkname?: string;
};

/** Why an archive is not one restore.ts reads; the message is for the operator. */
export class ArchiveError extends Error {}

/** The parts of an entry's path, or an ArchiveError for an absolute path or a `..` (an archive must not write outside its target). */
export function entryParts(name: string): string[] {
  const parts = name.replace(/\/+$/, '').split('/');
  if (name.startsWith('/') || parts.some((p) => p === '' || p === '.' || p === '..' || p.includes('\0')))
    throw new ArchiveError(`the archive holds an entry outside its own tree: ${JSON.stringify(name.slice(0, 200))}`);
  return parts;
}

/** Reads the archive entry by entry; `onEntry` consumes a file's content (or resumes it). */
export async function readArchive(file: string, onEntry: (entry: ArchiveEntry, content: NodeJS.ReadableStream) => Promise<void>) {
  const extract = tar.extract();
  const reading = pipeline(createReadStream(file), createGunzip(), extract);
  for await (const item of extract) {
    const h = item.header;
    if (h.type !== 'file' && h.type !== 'directory' && h.type !== 'symlink')
      throw new ArchiveError(`the archive holds a ${h.type} (${JSON.stringify(h.name)}): not one this tool writes`);
    entryParts(h.name);
    await onEntry(
      {
        name: h.name.replace(/\/+$/, ''),
        type: h.type,
        mode: h.mode ?? 0o600,
        uid: h.uid ?? 0,
        gid: h.gid ?? 0,
        mtime: h.mtime ?? new Date(),
        ...(h.linkname ? { linkname: h.linkname } : {}),
      },
      item as unknown as NodeJS.ReadableStream,
    );
    item.resume();
  }
  await reading;
}
