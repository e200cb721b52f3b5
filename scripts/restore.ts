/**
 * Brings an archive of scripts/backup.ts back into an empty DATA_DIR (docs/production.md "Backups"):
 *
 *   npm run restore -- <file.tar.gz>
 *
 * DATA_DIR (and, as root, where its cluster would go) must be missing or empty: a restore never
 * mixes with an instance. The embedded database comes back as the base backup with its
 * backup_label and WAL: the platform's first start replays the WAL (PostgreSQL's own recovery)
 * and runs from there. secrets.json and the agents' folders come back with their modes, and as
 * root with their owners. Links are made last, so no entry of the archive is ever written through
 * one, and no entry may name a path outside its tree.
 */
import {
  chmodSync,
  chownSync,
  createWriteStream,
  existsSync,
  lchownSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  utimesSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { ConfigError, loadConfig } from '../src/config/env.ts';
import { EmbeddedPostgresError } from '../src/db/embedded.ts';
import { clusterDir, runAsUser } from '../src/db/embedded-host.ts';
import { ArchiveError, entryParts, FORMAT, type Manifest, readArchive, VERSION } from './lib/backup-archive.ts';

const isEmpty = (dir: string) => !existsSync(dir) || readdirSync(dir).length === 0;

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (args.length !== 1 || args[0]!.startsWith('-')) {
    console.error('usage: npm run restore -- <file.tar.gz>   (into DATA_DIR, which must be empty)');
    return 2;
  }
  const file = args[0]!;
  if (!existsSync(file)) throw new ConfigError(`${file}: no such file`);
  const config = loadConfig();
  const dataDir = config.DATA_DIR;
  if (!isEmpty(dataDir))
    throw new ConfigError(`DATA_DIR (${dataDir}) is not empty: restore into an empty folder (set DATA_DIR), never over an instance`);
  mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  const root = process.getuid?.() === 0;
  // where the platform will look for the cluster of this DATA_DIR (as root, a folder the postgres user can reach)
  const server = runAsUser();
  const pgdata = clusterDir(server, dataDir, ['/var/lib/agent-platform', join(tmpdir(), 'agent-platform-data')]);
  if (!isEmpty(pgdata)) throw new ConfigError(`${pgdata}, where this DATA_DIR's database would go, is not empty: remove it first`);

  let manifest: Manifest | undefined;
  const links: { path: string; target: string; uid: number; gid: number }[] = [];
  const dirs: { path: string; mode: number; mtime: Date }[] = [];
  let files = 0;
  await readArchive(file, async (entry, content) => {
    const parts = entryParts(entry.name);
    if (entry.name === 'manifest.json' && entry.type === 'file') {
      const chunks: Buffer[] = [];
      for await (const c of content) chunks.push(c as Buffer);
      manifest = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Manifest;
      if (manifest.format !== FORMAT || manifest.version > VERSION)
        throw new ArchiveError(`${file} is not an agent-platform backup this version reads (${manifest.format} ${manifest.version})`);
      return;
    }
    // pg/… → the cluster; secrets.json and agents/… → DATA_DIR
    let path: string;
    if (parts[0] === 'pg') path = join(pgdata, ...parts.slice(1));
    else if ((entry.name === 'secrets.json' && entry.type === 'file') || parts[0] === 'agents') path = join(dataDir, ...parts);
    else throw new ArchiveError(`${file} holds ${JSON.stringify(entry.name)}, which is not part of a backup`);
    const owner = parts[0] === 'pg' ? server : root ? { uid: entry.uid, gid: entry.gid } : undefined;
    if (entry.type === 'directory') {
      mkdirSync(path, { recursive: true, mode: 0o700 });
      if (owner) chownSync(path, owner.uid, owner.gid);
      dirs.push({ path, mode: entry.mode, mtime: entry.mtime });
    } else if (entry.type === 'symlink') {
      links.push({ path, target: entry.linkname ?? '', ...(owner ?? { uid: -1, gid: -1 }) });
    } else {
      mkdirSync(join(path, '..'), { recursive: true, mode: 0o700 });
      // a new file only (wx): never one the archive made a link of, never an existing one
      await pipeline(content, createWriteStream(path, { flags: 'wx', mode: entry.mode & 0o777 }));
      chmodSync(path, entry.mode & 0o7777);
      if (owner) chownSync(path, owner.uid, owner.gid);
      utimesSync(path, entry.mtime, entry.mtime);
      files++;
    }
  });
  if (!manifest) throw new ArchiveError(`${file} has no manifest.json: not an agent-platform backup`);
  for (const l of links) {
    symlinkSync(l.target, l.path);
    if (l.uid >= 0) lchownSync(l.path, l.uid, l.gid);
  }
  // folders last, deepest first: their modes may forbid writing into them, and writing sets their times
  for (const d of dirs.reverse()) {
    chmodSync(d.path, d.mode & 0o7777);
    utimesSync(d.path, d.mtime, d.mtime);
  }
  if (manifest.database === 'embedded') {
    if (!existsSync(join(pgdata, 'backup_label')))
      throw new ArchiveError(`${file} has no pg/backup_label: its database cannot be recovered`);
    chmodSync(pgdata, 0o700); // PostgreSQL refuses a data directory others can read
  }
  const secrets = join(dataDir, 'secrets.json');
  const stored = existsSync(secrets) ? Object.keys(JSON.parse(readFileSync(secrets, 'utf8')) as object) : [];
  console.log(`restored ${files} files of the backup of ${manifest.createdAt} into ${dataDir}`);
  if (manifest.database === 'embedded') {
    console.log(`the database (PostgreSQL ${manifest.postgresVersion ?? '?'}) is in ${pgdata}: the first start replays its WAL`);
    if (config.DATABASE_URL)
      console.log('DATABASE_URL is set here: the platform uses that database, not the restored one, until you unset it');
  } else console.log("the database was DATABASE_URL's: restore it with that server's tools (pg_restore) before the first start");
  if (!stored.includes('walletEncryptionKey') || !stored.includes('secretsEncryptionKey'))
    console.log('the encryption keys were not in DATA_DIR: start with the same WALLET_ENCRYPTION_KEY and SECRETS_ENCRYPTION_KEY as before');
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    const known = err instanceof ConfigError || err instanceof EmbeddedPostgresError || err instanceof ArchiveError;
    console.error(known ? err.message : err);
    process.exit(1);
  },
);
