/**
 * API-key verification (docs/configuration.md API_KEY_CACHE_TTL_MS): the backend
 * `POST /api/validate-key` with a valid `sk_` key, on the platform as `npm start` wires it
 * (embedded PostgreSQL, createPlatform, the backend app), against a bare Fastify POST route
 * returning the same JSON body, in round-robin rounds of one run (lib/load.ts measureRounds).
 * Cases: as shipped (verified keys cached 5 s, lastUsed written at most once a minute) and with
 * the cache off (every validation reads PostgreSQL). Goals: p99 ≤ 1 ms at concurrency 1, and at
 * least 0.5x the bare route's throughput at concurrency 16.
 */
import { loadConfig } from '../src/config/env.ts';
import { resolveSecrets } from '../src/config/secrets.ts';
import { createDb, type Db } from '../src/db/client.ts';
import type { App } from '../src/http/shared/base-app.ts';
import { createPlatform, type Platform } from '../src/platform.ts';
import { type RunningServer, startBareFastify } from './lib/baseline.ts';
import { type BenchDatabase, startBenchDatabase } from './lib/bench-db.ts';
import { loadSettings, measureRounds } from './lib/load.ts';
import { describeMachine, machineLine } from './lib/machine.ts';
import { type BenchOutput, loadTable, round } from './lib/report.ts';

const PATH = '/api/validate-key';
const urlOf = (app: App) => {
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return `http://127.0.0.1:${addr.port}`;
};

export async function run(): Promise<BenchOutput> {
  const machine = describeMachine();
  const settings = loadSettings({ durationS: 5, warmupS: 1, connections: 16, rounds: 3 });
  let database: BenchDatabase | undefined;
  let db: Db | undefined;
  const platforms: Platform[] = [];
  const apps: App[] = [];
  let bare: RunningServer | undefined;
  try {
    database = await startBenchDatabase('keys-bench');
    const dir = database.dir;
    db = createDb(database.url, { poolSize: 10 });
    const start = async (ttl: string) => {
      const config = loadConfig(
        { DATA_DIR: dir, LOG_LEVEL: 'warn', INTERNAL_API_KEY: 'bench-internal-key', API_KEY_CACHE_TTL_MS: ttl },
        { cwd: dir, readDotEnv: false },
      );
      const platform = createPlatform({ config, db: db!, secrets: resolveSecrets(config) });
      const web = await platform.buildWebApp();
      const backend = await platform.buildBackendApp();
      await web.listen({ host: '127.0.0.1', port: 0 });
      await backend.listen({ host: '127.0.0.1', port: 0 });
      platforms.push(platform);
      apps.push(web, backend);
      return { web: urlOf(web), backend: urlOf(backend) };
    };
    const cached = await start('5000');
    const uncached = await start('0');

    const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const email = `bench${Date.now()}@example.com`;
    await post(`${cached.web}/api/register`, { email, password: 'bench-password-long', name: 'Bench' });
    const login = await post(`${cached.web}/api/auth/login`, { email, password: 'bench-password-long' });
    const cookie = /service-session=[^;]+/.exec(login.headers.get('set-cookie') ?? '')![0];
    const key = ((await (await post(`${cached.web}/api/keys`, { name: 'bench' }, { cookie })).json()) as { key: string }).key;
    const body = JSON.stringify({ apiKey: key });
    const headers = { 'content-type': 'application/json', authorization: 'Bearer bench-internal-key' };
    const profile = await (await post(`${cached.backend}${PATH}`, { apiKey: key }, { authorization: 'Bearer bench-internal-key' })).json();
    if (!(profile as { valid?: boolean }).valid) throw new Error(`validate-key: ${JSON.stringify(profile)}`);
    bare = await startBareFastify(PATH, profile, 'POST');

    const cases = [
      { key: 'cached', url: `${cached.backend}${PATH}`, method: 'POST', headers, body },
      { key: 'uncached', url: `${uncached.backend}${PATH}`, method: 'POST', headers, body },
    ];
    const baseline = { key: 'bare', url: bare.url, method: 'POST', headers: { 'content-type': 'application/json' }, body };
    const results: Record<string, unknown> = { machine, settings };
    const sections: string[] = [];
    const lines: string[] = [];
    for (const connections of [1, settings.connections]) {
      const r = await measureRounds(baseline, cases, { ...settings, connections });
      results[`concurrency${connections}`] = r;
      sections.push(
        `Concurrency ${connections}:`,
        '',
        loadTable([
          { label: 'bare Fastify POST, same body', result: r.bare! },
          { label: 'validate-key, cache on (as shipped)', result: r.cached!, ratio: r.cached!.ratio },
          { label: 'validate-key, cache off', result: r.uncached!, ratio: r.uncached!.ratio },
        ]),
        '',
      );
      lines.push(
        `- concurrency ${connections}: cached p99 ${round(r.cached!.p99Ms, 2)} ms, ${round(r.cached!.ratio, 2)}x the bare route's req/s (cache off: p99 ${round(r.uncached!.p99Ms, 2)} ms, ${round(r.uncached!.ratio, 2)}x)`,
      );
    }
    const markdown = [
      `Machine: ${machineLine(machine)}`,
      '',
      'Backend `POST /api/validate-key` with a valid `sk_` key and the INTERNAL_API_KEY bearer, against a bare Fastify POST route ' +
        "returning the same JSON (autocannon in its own process; latencies are autocannon's whole-millisecond histogram). " +
        `${settings.rounds} round-robin rounds of ${settings.durationS} s per case; ratios per round, then the median. ` +
        'Goals: p99 ≤ 1 ms at concurrency 1; ≥ 0.5x the bare route at concurrency 16.',
      '',
      ...sections,
      ...lines,
    ].join('\n');
    return { name: 'keys', results, markdown };
  } finally {
    await bare?.close().catch(() => {});
    for (const a of apps) await a.close().catch(() => {});
    for (const p of platforms) await p.close().catch(() => {});
    await db?.close().catch(() => {});
    await database?.stop();
  }
}
