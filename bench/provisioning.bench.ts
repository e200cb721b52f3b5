/**
 * Provisioning to running on the local driver: the time from POST /api/agents/provision
 * (web app → backend → deployment job → local driver → built-in runtime → /healthz) until the
 * agent's status reads `running`, median of 10; against the runtime's own start time (the same
 * local driver's deploy, then /healthz polled every 10 ms), also median of 10.
 * The platform path waits for health with the §4.12 poll (first probe at once, then every 2 s); the
 * local driver's deploy() returns once the agent listens, so the first probe normally succeeds.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../src/config/env.ts';
import { resolveSecrets, storedSecret } from '../src/config/secrets.ts';
import { createDb, type Db } from '../src/db/client.ts';
import { type EmbeddedServer, freePort, startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { probeHealthz } from '../src/domains/agents/agent-client/health-probe.client.ts';
import { createHostingDriver } from '../src/domains/agents/drivers/driver-registry.service.ts';
import { FIRST_AGENT_UID } from '../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import type { App } from '../src/http/shared/base-app.ts';
import { createPlatform, type Platform } from '../src/platform.ts';
import { type BenchOutput, round } from './lib/report.ts';

const RUNS = 10;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

export async function run(): Promise<BenchOutput> {
  const dir = mkdtempSync(join(tmpdir(), 'provisioning-bench-'));
  chmodSync(dir, 0o755); // as root the PostgreSQL server runs as the `postgres` OS user
  let embedded: EmbeddedServer | undefined;
  let db: Db | undefined;
  let platform: Platform | undefined;
  const apps: App[] = [];
  try {
    const [webPort, backendPort] = [await freePort(), await freePort()];
    const config = loadConfig(
      {
        DATA_DIR: dir,
        HOST: '127.0.0.1',
        WEB_PORT: String(webPort),
        BACKEND_PORT: String(backendPort),
        LOG_LEVEL: 'warn',
        INTERNAL_API_KEY: 'bench-internal-key',
        ADMIN_EMAILS: 'bench@example.com',
        HOSTING_DRIVER: 'local',
        AGENT_RUNTIME: 'builtin',
      },
      { cwd: dir, readDotEnv: false },
    );
    const secrets = resolveSecrets(config);
    embedded = await startEmbeddedPostgres({
      dataDir: dir,
      password: storedSecret(dir, 'embeddedDbPassword', () => `bench-${Date.now().toString(36)}`),
    });
    await migrate(embedded.url);
    db = createDb(embedded.url, { poolSize: config.DATABASE_POOL_SIZE });
    platform = createPlatform({ config, db, secrets });
    const web = await platform.buildWebApp();
    const backend = await platform.buildBackendApp();
    apps.push(web, backend);
    await web.listen({ host: '127.0.0.1', port: webPort });
    await backend.listen({ host: '127.0.0.1', port: backendPort });
    await platform.startWorkers();

    const base = `http://127.0.0.1:${webPort}`;
    const creds = { email: 'bench@example.com', password: 'correct horse battery' };
    await fetch(`${base}/api/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(creds) });
    const login = await fetch(`${base}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(creds),
    });
    const cookie = /service-session=[^;]+/.exec(login.headers.get('set-cookie') ?? '')![0];
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`${base}${path}`, {
        method,
        headers: { cookie, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return (await r.json()) as Record<string, any>;
    };

    const provisioning: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const id = (await call('POST', '/api/agents/provision', { name: `bench ${i}` })).agent.id as string;
      for (;;) {
        const status = (await call('GET', `/api/agents/${id}`)).agent.status;
        if (status === 'running') break;
        if (status === 'error') throw new Error('provisioning failed');
        await new Promise((r) => setTimeout(r, 10));
      }
      provisioning.push(performance.now() - t0);
      await call('DELETE', `/api/agents/${id}`);
    }

    // baseline: the runtime's own start, through the same driver, without the platform around it
    const driver = createHostingDriver({ ...config, DATA_DIR: join(dir, 'baseline') });
    const runtime: number[] = [];
    try {
      for (let i = 0; i < RUNS; i++) {
        const agentId = `bench-baseline-${i}`;
        const t0 = performance.now();
        const d = await driver.deploy({
          agentId,
          userId: 'bench',
          plan: 'label',
          gatewayToken: 'x'.repeat(48),
          platformApiKey: 'apk_bench',
          backendUrl: config.BACKEND_URL,
          config: {},
          // sandboxed as root, an agent needs a user of its own (the database allocates it for the platform's agents)
          ...(process.getuid?.() === 0 ? { sandboxUid: FIRST_AGENT_UID + 999_000_100 + i } : {}),
        });
        while (!(await probeHealthz(d.url, 1000))) await new Promise((r) => setTimeout(r, 10));
        runtime.push(performance.now() - t0);
        await driver.delete(agentId);
      }
    } finally {
      await driver.shutdown();
    }

    const results = {
      runs: RUNS,
      provisioningToRunningMedianMs: round(median(provisioning), 0),
      runtimeStartMedianMs: round(median(runtime), 0),
      provisioningMs: provisioning.map((x) => round(x, 0)),
      runtimeStartMs: runtime.map((x) => round(x, 0)),
    };
    const markdown = [
      `Local driver, built-in runtime, ${RUNS} runs each (medians):`,
      '',
      '| measure | median ms |',
      '|---|---|',
      `| provision → status \`running\` (web → backend → job → driver → /healthz) | ${results.provisioningToRunningMedianMs} |`,
      `| runtime start alone (driver deploy → /healthz answers, polled every 10 ms) | ${results.runtimeStartMedianMs} |`,
      '',
      "The platform waits for health with the §4.12 poll (first probe at once, then every 2 s). The local driver's deploy() returns once the agent accepts connections on its port, so the first probe normally succeeds; the difference to the runtime alone is the web → backend → job hand-off and the database writes around it.",
    ].join('\n');
    return { name: 'provisioning', results, markdown };
  } finally {
    for (const app of apps) await app.close().catch(() => {});
    await platform?.close().catch(() => {});
    await db?.close().catch(() => {});
    await embedded?.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}
