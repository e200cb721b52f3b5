/**
 * compose.yaml's database set-up on a real, empty PostgreSQL cluster (the embedded server's
 * binaries, as the postgres image would have it): deploy/compose/initdb.sh run the way the image's
 * entrypoint runs it (psql as POSTGRES_USER on POSTGRES_DB, with postgres.env's passwords), then
 * the platform's migrations as secrets.env's DATABASE_URL (the owner role, not a superuser) and
 * a query as its DATABASE_REQUEST_URL, which row-level security and the money tables' grants hold.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { type EmbeddedServer, startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { migrate } from '../../src/db/migrate.ts';
import { connectsAsPrivileged } from '../../src/db/roles.ts';
import { readEnvFile } from './settings.ts';

const ROOT = join(import.meta.dirname, '../..');
const psql = spawnSync('psql', ['--version'], { encoding: 'utf8' });
const dataDir = mkdtempSync(join(tmpdir(), 'compose-db-'));
chmodSync(dataDir, 0o755); // the server runs as the postgres OS user when we are root
let server: EmbeddedServer | undefined;

afterAll(async () => {
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<T>(sql)).rows;
  } finally {
    await c.end();
  }
}

/** `url` with the compose network's host (postgres:5432) replaced by the local server's. */
const toLocal = (url: string, local: URL) => {
  const u = new URL(url);
  u.host = local.host;
  return u.toString();
};

describe('compose: deploy/compose/initdb.sh on an empty cluster', () => {
  it.skipIf(psql.status !== 0)('creates the roles the platform then migrates and serves requests with (psql needed)', async () => {
    server = await startEmbeddedPostgres({ dataDir, password: 'compose-admin', database: 'postgres' });
    const admin = new URL(server.url);
    const compose = parse(readFileSync(join(ROOT, 'compose.yaml'), 'utf8'));
    const database = compose.services.postgres.environment.POSTGRES_DB as string;
    await query(server.url, `CREATE DATABASE ${database}`);

    const pgEnv = readEnvFile(join(ROOT, 'deploy/compose/postgres.env.example'));
    const r = spawnSync('sh', [join(ROOT, 'deploy/compose/initdb.sh')], {
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH ?? '',
        ...pgEnv,
        POSTGRES_USER: decodeURIComponent(admin.username),
        POSTGRES_DB: database,
        PGHOST: admin.hostname,
        PGPORT: admin.port,
        PGPASSWORD: decodeURIComponent(admin.password),
      },
    });
    expect(r.status, r.stderr).toBe(0);

    const appEnv = readEnvFile(join(ROOT, 'deploy/compose/secrets.env.example'));
    const ownerUrl = toLocal(appEnv.DATABASE_URL!, admin);
    const requestUrl = toLocal(appEnv.DATABASE_REQUEST_URL!, admin);
    expect(await connectsAsPrivileged(ownerUrl)).toEqual({ role: 'platform_owner', superuser: false, bypassRls: false });
    expect(await connectsAsPrivileged(requestUrl)).toEqual({ role: 'platform_request', superuser: false, bypassRls: false });

    // the owner role, no superuser, applies every migration (they grant to and revoke from platform_request)
    const { applied } = await migrate(ownerUrl);
    expect(applied.length).toBeGreaterThan(10);
    expect(
      (await query<{ owner: string }>(ownerUrl, "SELECT tableowner AS owner FROM pg_tables WHERE tablename = 'users'"))[0]?.owner,
    ).toBe('platform_owner');
    // the request role: no user context, no rows; no right at all on the ledger (docs/security.md "Database roles")
    expect(await query(requestUrl, 'SELECT id FROM agents')).toEqual([]);
    await expect(query(requestUrl, 'SELECT 1 FROM ledger_entries')).rejects.toThrow(/permission denied/);
  });
});
