/**
 * Generates src/db/types.gen.ts, the Kysely row types of every table, from a freshly migrated
 * database with kysely-codegen (docs/architecture.md "Adding a domain and an endpoint"). The database is a
 * throw-away one: on TEST_DATABASE_URL's server when set, otherwise on an embedded server in a
 * temporary folder.
 *
 *   npm run db:types              rewrite the file
 *   test/db/types-drift.test.ts   fails when the file differs from what the migrations give
 *
 * The database knows column types; a few columns are narrower in the code than in SQL (a text
 * column with a CHECK list, a jsonb with a known shape, int8 read as a JS number by our pg type
 * parser): those are the OVERRIDES below, so the narrowing lives in one place.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';

const ROOT = resolve(import.meta.dirname, '..');
export const DB_TYPES_FILE = join(ROOT, 'src/db/types.gen.ts');

/** Database type → TypeScript type, for every column of that type. */
export const TYPE_MAPPING = {
  // int8 (bigint) is parsed into a JS number (src/db/client.ts): counts, ids and micro-USD stay below 2^53
  int8: 'number',
};

/** Columns whose TypeScript type is narrower than their SQL type (CHECK lists, jsonb shapes). */
export const OVERRIDES: Record<string, string> = {
  // jsonb read as an object by pg; written as JSON text (JSON.stringify) by our repositories
  'agents.config': 'ColumnType<Record<string, unknown>, string | undefined, string>',
  'agent_configs.config': 'ColumnType<Record<string, unknown> | null, string | null, string | null>',
  'config_backups.config': 'ColumnType<Record<string, unknown>, string, string>',
  'watchdog_notifications.payload': 'ColumnType<Record<string, unknown>, string, string>',
  // a date compared with 'YYYY-MM-01' strings (ai.repo.ts monthly rollup)
  'ai_usage_monthly.month': 'ColumnType<Date | string, string, string>',
  // text columns with a CHECK list of values (the migration that adds the column has the list)
  'users.plan': 'Generated<"solo" | "collective" | "label" | "network">',
  'agents.status': 'Generated<"pending" | "provisioning" | "running" | "active" | "stopped" | "suspended" | "error">',
  'deployments.action': 'Generated<"deploy">',
  'deployments.status': 'Generated<"queued" | "running" | "succeeded" | "failed">',
  'agent_messages.sender': '"user" | "agent" | "system"',
  'workflow_nodes.type': '"trigger" | "action" | "condition" | "output"',
  'payment_sessions.status': 'Generated<"active" | "closed" | "expired">',
  'ledger_entries.kind': '"credit" | "debit" | "session_open" | "session_debit" | "session_close" | "session_expire" | "session_refund"',
  'agent_watchdog.state': 'Generated<"starting" | "running" | "degraded" | "repairing" | "crash_loop" | "stopped">',
  'agent_watchdog_events.kind': '"transition" | "crash" | "repair"',
  'watchdog_notifications.channel': '"telegram" | "webhook"',
  'watchdog_notifications.status': 'Generated<"pending" | "sent" | "failed">',
  'heartbeat_settings.last_run_status': '"ok" | "failed" | "skipped" | null',
  'agent_channels.kind': '"telegram" | "discord"',
  'agent_channels.status': 'Generated<"connecting" | "connected" | "error" | "disabled">',
};

export function codegenArgs(url: string, outFile: string, verify = false): string[] {
  return [
    '--dialect',
    'postgres',
    '--url',
    url,
    '--out-file',
    outFile,
    '--exclude-pattern',
    'schema_migrations',
    '--type-mapping',
    JSON.stringify(TYPE_MAPPING),
    '--overrides',
    JSON.stringify({ columns: OVERRIDES }),
    '--log-level',
    'error',
    ...(verify ? ['--verify'] : []),
  ];
}

/** Runs kysely-codegen against `url`; with `verify`, exits non-zero when the file is stale. */
export function runCodegen(url: string, verify = false): { ok: boolean; output: string } {
  // the CLI's own file with this Node (its .bin shim would take whichever `node` is on PATH)
  const bin = join(ROOT, 'node_modules/kysely-codegen/dist/cli/bin.js');
  const alias = join(ROOT, 'scripts/lib/typescript-alias.cjs');
  const r = spawnSync(process.execPath, ['--require', alias, bin, ...codegenArgs(url, DB_TYPES_FILE, verify)], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  // kysely-codegen tries TypeScript's parser on override strings (TypeScript 7 has no JS API) and
  // falls back to the text as written, which is what we want: drop that notice
  const output = `${r.stdout}${r.stderr}`
    .split('\n')
    .filter((l) => !/^Failed to parse type expression|^\s+at /.test(l))
    .join('\n');
  return { ok: r.status === 0, output };
}

const withDatabase = (url: string, database: string) => {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
};

if (import.meta.main) {
  let dir: string | undefined;
  let stop: (() => Promise<void>) | undefined;
  let adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    dir = mkdtempSync(join(tmpdir(), 'db-types-'));
    chmodSync(dir, 0o755); // as root the server runs as the `postgres` OS user
    const server = await startEmbeddedPostgres({ dataDir: dir, password: 'types', database: 'postgres' });
    adminUrl = server.url;
    stop = () => server.stop();
  }
  const name = `types_${process.pid}_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
    await migrate(withDatabase(adminUrl, name));
    const r = runCodegen(withDatabase(adminUrl, name), process.argv.includes('--verify'));
    process.stdout.write(r.output);
    if (!r.ok) process.exitCode = 1;
    else if (!process.argv.includes('--verify')) console.log(`wrote ${DB_TYPES_FILE}`);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => {});
    await admin.end();
    await stop?.();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}
