/**
 * A backup of the whole instance in one archive, while the platform runs (docs/production.md "Backups"):
 *
 *   npm run backup                   writes ./agent-platform-backup-<UTC time>.tar.gz
 *   npm run backup -- <file>         writes <file> (never over an existing one)
 *
 * The embedded database (DATABASE_URL unset) is copied online with PostgreSQL's low-level backup
 * API, in one session: a temporary replication slot keeps every WAL segment from now on,
 * `pg_backup_start` checkpoints, the cluster's files are copied, `pg_backup_stop` returns the
 * backup_label (written into the copy), and the WAL written in between is added: a restored copy
 * replays it at its first start and is the database as it was when the backup ended. The embedded
 * server ships no pg_dump. With DATABASE_URL set the database is the operator's to back up with
 * that server's own tools; the archive still holds DATA_DIR/secrets.json and the agents' folders.
 * The archive holds secrets (encryption keys, database passwords): it is written with mode 0600.
 */
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { ConfigError, loadConfig } from '../src/config/env.ts';
import { EmbeddedPostgresError, embeddedClusterDir, startEmbeddedPostgres } from '../src/db/embedded.ts';
import { ArchiveError, createArchiveWriter, FORMAT, type Manifest, VERSION } from './lib/backup-archive.ts';

type Writer = ReturnType<typeof createArchiveWriter>;

/** Files of a cluster a base backup leaves out (PostgreSQL's own list for pg_basebackup): the running server's, or rebuilt at start. */
const SKIP_FILES = new Set([
  'postmaster.pid',
  'postmaster.opts',
  'backup_label',
  'tablespace_map',
  'current_logfiles',
  'postgresql.auto.conf.tmp',
]);
/** Folders whose content is the running server's alone; they are kept, empty. pg_wal's segments are added after the copy. */
const EMPTY_DIRS = new Set([
  'pg_wal',
  'pg_stat_tmp',
  'pg_replslot',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_subtrans',
]);

function skipInCluster(rel: string, isDir: boolean): boolean {
  const parts = rel.split('/');
  const name = parts.at(-1)!;
  if (parts.length === 1 && !isDir && SKIP_FILES.has(name)) return true;
  if (parts.length === 2 && EMPTY_DIRS.has(parts[0]!) && !(parts[0] === 'pg_wal' && name === 'archive_status')) return true;
  if (parts.length > 2 && parts[0] === 'pg_wal') return true;
  return name.startsWith('pg_internal.init') || name.startsWith('pgsql_tmp');
}

async function backupEmbedded(archive: Writer, dataDir: string): Promise<Pick<Manifest, 'postgresVersion' | 'walStart' | 'walStop'>> {
  const pgdata = embeddedClusterDir(dataDir);
  let password: string | undefined;
  try {
    password = (JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as Record<string, string>).embeddedDbPassword;
  } catch {
    password = undefined;
  }
  if (!password || !existsSync(join(pgdata, 'PG_VERSION')))
    throw new ConfigError(`No embedded database in DATA_DIR (${dataDir}): start the platform once (npm start), or set DATA_DIR`);
  // joins the server the platform runs (and keeps it up until this backup ends), or starts one for it
  const server = await startEmbeddedPostgres({ dataDir, password });
  const client = new pg.Client({ connectionString: server.url, application_name: 'agent-platform-backup' });
  try {
    await client.connect();
    const version = (await client.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v;
    // a temporary slot (gone with this session) reserves the WAL from here: checkpoints during the copy recycle none of it
    await client.query('SELECT pg_create_physical_replication_slot($1, true, true)', [`agent_platform_backup_${process.pid}`]);
    const start = (
      await client.query<{ lsn: string; wal: string }>(
        'SELECT l::text AS lsn, pg_walfile_name(l) AS wal FROM pg_backup_start($1, true) AS l',
        [`agent-platform ${new Date().toISOString()}`],
      )
    ).rows[0]!;
    await archive.addTree('pg', { root: pgdata }, skipInCluster);
    const stop = (
      await client.query<{ lsn: string; wal: string; labelfile: string; spcmapfile: string | null }>(
        'SELECT lsn::text AS lsn, pg_walfile_name(lsn) AS wal, labelfile, spcmapfile FROM pg_backup_stop(false)',
      )
    ).rows[0]!;
    await archive.addBuffer('pg/backup_label', stop.labelfile);
    if (stop.spcmapfile) await archive.addBuffer('pg/tablespace_map', stop.spcmapfile);
    // the segments from the one holding the start to the one holding the end (names sort by timeline, then position)
    const segments = readdirSync(join(pgdata, 'pg_wal'))
      .filter((n) => (/^[0-9A-F]{24}$/.test(n) && n >= start.wal && n <= stop.wal) || /^[0-9A-F]{8}\.history$/.test(n))
      .sort();
    if (!segments.includes(start.wal) || !segments.includes(stop.wal))
      throw new EmbeddedPostgresError(`the WAL of the backup (${start.wal} to ${stop.wal}) is not all in ${join(pgdata, 'pg_wal')}`);
    for (const name of segments) await archive.addConfinedFile(`pg/pg_wal/${name}`, { root: join(pgdata, 'pg_wal') }, [name]);
    return { postgresVersion: version, walStart: start.lsn, walStop: stop.lsn };
  } finally {
    await client.end().catch(() => undefined);
    await server.stop();
  }
}

/** DATA_DIR/agents/<id>/{workspace,home}: each tree as its owner left it. */
async function backupAgents(archive: Writer, dataDir: string): Promise<number> {
  const root = join(dataDir, 'agents');
  if (!existsSync(root)) return 0;
  let agents = 0;
  await archive.addDir('agents', statSync(root));
  for (const id of readdirSync(root).sort()) {
    const base = join(root, id);
    if (!statSync(base).isDirectory()) continue;
    agents++;
    await archive.addDir(`agents/${id}`, statSync(base));
    for (const tree of ['workspace', 'home']) {
      const dir = join(base, tree);
      // only files of the folder's owner (the agent's user): not one it hard-linked from elsewhere
      if (existsSync(dir)) await archive.addTree(`agents/${id}/${tree}`, { root: dir, owner: statSync(dir).uid });
    }
  }
  return agents;
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (args.length > 1 || args[0]?.startsWith('-')) {
    console.error('usage: npm run backup [-- <file.tar.gz>]');
    return 2;
  }
  const config = loadConfig();
  const stamp = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  const out = resolve(args[0] ?? `agent-platform-backup-${stamp}.tar.gz`);
  if (existsSync(out)) throw new ConfigError(`${out} exists: name another file`);
  const part = `${out}.part`;
  const archive = createArchiveWriter(part);
  try {
    const external = config.DATABASE_URL !== undefined;
    const manifest: Manifest = {
      format: FORMAT,
      version: VERSION,
      createdAt: new Date().toISOString(),
      database: external ? 'external' : 'embedded',
    };
    if (external) {
      console.log(
        'DATABASE_URL is set: the database is yours to back up with its own tools, e.g. pg_dump -Fc "$DATABASE_URL" > platform.dump ' +
          "(a pg_dump of the server's major version or newer), or its continuous archiving; this archive holds DATA_DIR's secrets and agent folders.",
      );
    } else Object.assign(manifest, await backupEmbedded(archive, config.DATA_DIR));
    const withSecrets = await archive.addConfinedFile('secrets.json', { root: config.DATA_DIR }, ['secrets.json']);
    const agents = await backupAgents(archive, config.DATA_DIR);
    await archive.addBuffer('manifest.json', `${JSON.stringify(manifest, null, 2)}\n`);
    await archive.finish();
    renameSync(part, out);
    const held = [external ? undefined : 'the embedded database', withSecrets ? 'secrets.json' : undefined, `${agents} agent folder(s)`];
    console.log(`backup written: ${out} (${(statSync(out).size / 1048576).toFixed(1)} MB: ${held.filter(Boolean).join(', ')})`);
    console.log('it holds the encryption keys and database passwords: keep it as safe as they are');
    return 0;
  } catch (err) {
    await archive.abort();
    rmSync(part, { force: true });
    throw err;
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    const known = err instanceof ConfigError || err instanceof EmbeddedPostgresError || err instanceof ArchiveError;
    console.error(known ? err.message : err);
    process.exit(1);
  },
);
