/**
 * Session throughput: authenticated `GET /api/auth/session` on the platform as
 * `npm start` wires it (embedded PostgreSQL, migrations, createPlatform, the web app), against a
 * bare Fastify route returning the same JSON body, measured in one run.
 *
 * What runs where: this process hosts the platform's web app and the bare Fastify baseline (each
 * on its own free loopback port, never loaded at the same time); PostgreSQL runs as its own
 * server process; autocannon runs in a child process per measurement (lib/load.ts). All of it
 * shares the machine's cores, which is why we compare ratios from one run, not absolute numbers.
 *
 * Cases, measured in round-robin rounds (lib/load.ts measureRounds) so load from other work on a
 * shared machine spreads over all cases:
 *   a   bare Fastify, same body (the baseline; first in every round)
 *   c   platform, GET /api/auth/session without a cookie (no database query: framework cost)
 *   b   platform, authenticated, as shipped: the 5 s in-process session cache
 *       (src/lib/evicting-cache.ts) in front of the prepared-statement lookup, LOG_LEVEL=warn
 *   b-info  the same at LOG_LEVEL=info (pino JSON lines to /dev/null: serialization, not the terminal)
 *   d   platform, authenticated, session cache off: every request a cache miss, each with one of
 *       1000 sessions picked at random (as misses are in production: different tokens); misses of
 *       one event-loop turn share one PostgreSQL query (named prepared statement, `= ANY`)
 * plus the raw session query through the `pg` pool without HTTP, unnamed vs prepared (the
 * database's own ceiling here).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { loadConfig } from '../src/config/env.ts';
import { resolveSecrets, storedSecret } from '../src/config/secrets.ts';
import { createDb, type Db } from '../src/db/client.ts';
import { type EmbeddedServer, startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import type { App } from '../src/http/shared/base-app.ts';
import { loggerOptions } from '../src/http/shared/logging.ts';
import { randomToken, sha256 } from '../src/lib/crypto.ts';
import { createSessionCache } from '../src/lib/evicting-cache.ts';
import { createPlatform, type Platform } from '../src/platform.ts';
import { type RunningServer, startBareFastify } from './lib/baseline.ts';
import { loadSettings, measureRounds, type RoundsResult } from './lib/load.ts';
import { describeMachine, machineLine } from './lib/machine.ts';
import { type BenchOutput, loadTable, round } from './lib/report.ts';

const PATH = '/api/auth/session';
const COOKIE = 'service-session';
/** seconds of the raw-query measurement */
const RAW_QUERY_S = 5;

const urlOf = (app: App) => {
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return `http://127.0.0.1:${addr.port}`;
};

async function signIn(base: string): Promise<{ cookie: string; body: unknown }> {
  const email = `bench-${Date.now()}@example.com`;
  const password = 'bench-password-123';
  const reg = await fetch(`${base}/api/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password, name: 'Bench User' }),
  });
  if (reg.status !== 201) throw new Error(`register: ${reg.status} ${await reg.text()}`);
  const login = await fetch(`${base}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  if (login.status !== 200) throw new Error(`login: ${login.status} ${await login.text()}`);
  const set = login.headers.getSetCookie().find((c) => c.startsWith(`${COOKIE}=`));
  if (!set) throw new Error('login set no session cookie');
  const cookie = set.split(';')[0]!;
  const check = await fetch(`${base}${PATH}`, { headers: { cookie } });
  const body = (await check.json()) as { user: unknown };
  if (!body.user) throw new Error(`session with the new cookie has no user: ${JSON.stringify(body)}`);
  return { cookie, body };
}

async function expectBody(url: string, headers: Record<string, string>, want: unknown) {
  const res = await fetch(url, { headers });
  const got = await res.json();
  if (res.status !== 200 || JSON.stringify(got) !== JSON.stringify(want)) {
    throw new Error(`${url}: expected 200 ${JSON.stringify(want)}, got ${res.status} ${JSON.stringify(got)}`);
  }
}

/** distinct sessions the cache-off case picks from */
const MISS_SESSIONS = 1000;

/** The session lookup's SQL, one token (the app asks for a batch with `= ANY`: accountsRepo.findSessionUsers). */
const SESSION_SQL =
  'SELECT u.id, u.name, u.email, s.expires_at FROM sessions s JOIN users u ON u.id = s.user_id ' +
  'WHERE s.token_hash = $1 AND s.expires_at > now()';

type RawMode = 'unnamed' | 'prepared';

/** The session lookup through the pool, `concurrency` callers, no HTTP: the database's ceiling here. */
async function rawQuery(db: Db, tokenHash: Buffer, concurrency: number, seconds: number, mode: RawMode) {
  const run =
    mode === 'prepared'
      ? () => db.pool.query({ name: 'bench_session_user', text: SESSION_SQL, values: [tokenHash] }).then((r) => r.rowCount)
      : () => db.pool.query({ text: SESSION_SQL, values: [tokenHash] }).then((r) => r.rowCount);
  const latencies: number[] = [];
  const until = performance.now() + seconds * 1000;
  const worker = async () => {
    while (performance.now() < until) {
      const t = performance.now();
      if ((await run()) !== 1) throw new Error('raw session query found no row');
      latencies.push(performance.now() - t);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((x, y) => x - y);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  return {
    qps: round(latencies.length / elapsed, 0),
    p50Ms: round(pct(50)),
    p99Ms: round(pct(99)),
    queries: latencies.length,
    concurrency,
    mode,
  };
}

export async function run(): Promise<BenchOutput> {
  const machine = describeMachine();
  const settings = loadSettings({ durationS: 4, warmupS: 3, connections: 50, rounds: 3 });

  const dir = mkdtempSync(join(tmpdir(), 'platform-bench-'));
  chmodSync(dir, 0o755); // as root the PostgreSQL server runs as the `postgres` OS user
  let embedded: EmbeddedServer | undefined;
  let db: Db | undefined;
  const platforms: Platform[] = [];
  const apps: App[] = [];
  const closers: (() => Promise<void>)[] = [];
  let bare: RunningServer | undefined;
  try {
    // as `npm start` does, with an explicit environment (no .env, no DATABASE_URL, no REDIS_URL)
    const config = loadConfig(
      { DATA_DIR: dir, HOST: '127.0.0.1', WEB_PORT: '0', BACKEND_PORT: '0', LOG_LEVEL: 'warn' },
      { cwd: dir, readDotEnv: false },
    );
    const secrets = resolveSecrets(config);
    const password = storedSecret(config.DATA_DIR, 'embeddedDbPassword', () => `bench-${Date.now().toString(36)}`);
    const t0 = performance.now();
    embedded = await startEmbeddedPostgres({ dataDir: config.DATA_DIR, password });
    await migrate(embedded.url);
    const startupMs = round(performance.now() - t0, 0);
    db = createDb(embedded.url, { poolSize: config.DATABASE_POOL_SIZE });

    const platform = createPlatform({ config, db, secrets });
    platforms.push(platform);
    const web = await platform.buildWebApp();
    apps.push(web);
    await web.listen({ host: '127.0.0.1', port: 0 });
    const base = urlOf(web);
    const { cookie, body } = await signIn(base);
    const auth = { cookie };

    // LOG_LEVEL=info, same redaction and serializers, to /dev/null (sync, as pino's stdout default)
    const infoLogger = pino(loggerOptions('info') as pino.LoggerOptions, pino.destination({ dest: '/dev/null', sync: true }));
    const platformInfo = createPlatform({ config: { ...config, LOG_LEVEL: 'info' }, db, secrets, logger: infoLogger });
    platforms.push(platformInfo);
    const webInfo = await platformInfo.buildWebApp();
    apps.push(webInfo);
    await webInfo.listen({ host: '127.0.0.1', port: 0 });

    const cacheTtlMs = 5000; // the default of createSessionCache
    const platformNoCache = createPlatform({ config, db, secrets, sessionCache: createSessionCache({ ttlMs: 0 }) });
    platforms.push(platformNoCache);
    const webNoCache = await platformNoCache.buildWebApp();
    apps.push(webNoCache);
    await webNoCache.listen({ host: '127.0.0.1', port: 0 });

    // the cache-off case with many sessions (one cookie picked at random per request): concurrent
    // misses are for different tokens, as they are in production, so batching cannot dedupe them
    const userId = (body as { user: { id: string } }).user.id;
    const missCookies: string[] = [];
    for (let i = 0; i < MISS_SESSIONS; i++) {
      const token = randomToken(32);
      await db.pool.query("INSERT INTO sessions (user_id, token_hash, expires_at) VALUES ($1, $2, now() + interval '1 day')", [
        userId,
        sha256(token),
      ]);
      missCookies.push(`${COOKIE}=${token}`);
    }
    // what autovacuum does within a minute of these inserts on a live database: without table
    // statistics the planner scans all sessions for every lookup (3x the PostgreSQL CPU per miss;
    // the bench measured that, not the platform, before 2026-11-25)
    await db.pool.query('ANALYZE sessions; ANALYZE users');

    bare = await startBareFastify(PATH, body);

    // every endpoint answers what we think before we load it
    await expectBody(bare.url, {}, body);
    await expectBody(`${base}${PATH}`, auth, body);
    await expectBody(`${base}${PATH}`, {}, { user: null });
    await expectBody(`${urlOf(webInfo)}${PATH}`, auth, body);
    await expectBody(`${urlOf(webNoCache)}${PATH}`, auth, body);
    await expectBody(`${urlOf(webNoCache)}${PATH}`, { cookie: missCookies.at(-1)! }, body);

    const step = (label: string) => process.stderr.write(`  session: ${label}\n`);
    const m = await measureRounds(
      { key: 'a_bare', url: bare.url },
      [
        { key: 'c_unauthenticated', url: `${base}${PATH}` },
        { key: 'b_authenticated', url: `${base}${PATH}`, headers: auth },
        { key: 'b_authenticated_info', url: `${urlOf(webInfo)}${PATH}`, headers: auth },
        { key: 'd_authenticated_no_cache', url: `${urlOf(webNoCache)}${PATH}`, cookies: missCookies },
      ],
      { ...settings, pipelining: 1, onStep: step },
    );
    step('session lookup without HTTP');
    const tokenHash = sha256(decodeURIComponent(cookie.slice(COOKIE.length + 1)));
    const raw = await rawQuery(db, tokenHash, settings.connections, RAW_QUERY_S, 'unnamed');
    const rawPrepared = await rawQuery(db, tokenHash, settings.connections, RAW_QUERY_S, 'prepared');

    const a = m.a_bare!,
      b = m.b_authenticated!,
      c = m.c_unauthenticated!,
      bInfo = m.b_authenticated_info!;
    const d = m.d_authenticated_no_cache!;
    const results = {
      machine,
      settings: { ...settings, pipelining: 1, poolSize: config.DATABASE_POOL_SIZE, logLevel: 'warn', cacheTtlMs },
      embeddedStartupAndMigrateMs: startupMs,
      cases: m,
      rawQuery: { unnamed: raw, prepared: rawPrepared },
      ratios: {
        authenticated_vs_bare: round(b.ratio),
        unauthenticated_vs_bare: round(c.ratio),
        authenticated_info_vs_bare: round(bInfo.ratio),
        no_cache_vs_bare: round(d.ratio),
      },
    };

    const rounds = (r: RoundsResult) => r.roundsRps.map((x) => x.toLocaleString('en-US')).join(' / ');
    const markdown = [
      `### Session throughput (\`GET ${PATH}\`)`,
      '',
      `Machine: ${machineLine(machine)}.`,
      `autocannon ${settings.connections} connections, pipelining 1; ${settings.rounds} round-robin rounds of ${settings.durationS} s per case ` +
        `(${settings.warmupS} s warm-up in the first round, 1 s after); platform LOG_LEVEL=warn unless stated; pg pool ${config.DATABASE_POOL_SIZE}; ` +
        `embedded PostgreSQL start + migrate ${startupMs} ms. req/s is the median round; the ratio is the median of per-round ratios to the bare route measured in the same round.`,
      '',
      loadTable([
        { label: 'a bare Fastify, same JSON body (baseline)', result: a, ratio: 1 },
        { label: 'c platform, no cookie (no DB query)', result: c, ratio: c.ratio },
        { label: '**b platform, authenticated (as shipped: 5 s session cache + prepared lookup)**', result: b, ratio: b.ratio },
        { label: 'b platform, authenticated, LOG_LEVEL=info', result: bInfo, ratio: bInfo.ratio },
        {
          label: `d platform, authenticated, session cache off: every request a miss (${MISS_SESSIONS} sessions, one at random per request; misses of one event-loop turn share a query)`,
          result: d,
          ratio: d.ratio,
        },
      ]),
      '',
      `**Authenticated session / bare Fastify: ${b.ratio.toFixed(2)}** (earlier target ≥ 0.5; team goal ≥ 0.7). ` +
        `Unauthenticated / bare: ${c.ratio.toFixed(2)}. Cache off (every request a miss, batched per event-loop turn): ${d.ratio.toFixed(2)}.`,
      '',
      `Per-round req/s: bare ${rounds(a)}; authenticated ${rounds(b)}; unauthenticated ${rounds(c)}; cache off ${rounds(d)}.`,
      '',
      `Session lookup without HTTP (${settings.connections} concurrent callers in this process, pool ${config.DATABASE_POOL_SIZE}, ${RAW_QUERY_S} s each): ` +
        `unnamed statement ${raw.qps.toLocaleString('en-US')} queries/s (p50 ${raw.p50Ms} ms, p99 ${raw.p99Ms} ms); ` +
        `as the named prepared statement the app uses ${rawPrepared.qps.toLocaleString('en-US')} queries/s (p50 ${rawPrepared.p50Ms} ms, p99 ${rawPrepared.p99Ms} ms).`,
    ].join('\n');

    return { name: 'session', results, markdown };
  } finally {
    await bare?.close().catch(() => {});
    for (const app of apps) await app.close().catch(() => {});
    for (const close of closers) await close().catch(() => {});
    for (const p of platforms) await p.close().catch(() => {});
    await db?.close().catch(() => {});
    await embedded?.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}
