/**
 * The whole platform on real sockets (web app, backend app, workers, the real local driver with
 * the built-in runtime), over a cloned test database and a temporary DATA_DIR, with a local
 * OpenAI-compatible fake as the agents' model provider. `stop()` then `start()` is a platform
 * restart over the same database and DATA_DIR.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { expect } from 'vitest';
import { type Config, loadConfig } from '../../src/config/env.ts';
import { freePort } from '../../src/db/embedded.ts';
import type { App } from '../../src/http/shared/base-app.ts';
import { createMemoryRateLimiter } from '../../src/lib/rate-limiter.ts';
import { createPlatform, type Platform } from '../../src/platform.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { testAgentSandbox } from './agent-sandbox.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { TEST_SECRETS } from './platform.ts';

export type LivePlatform = {
  config: Config;
  database: TestDatabase;
  upstream: FakeOpenAi;
  webUrl: string;
  running(): { platform: Platform; web: App; backend: App } | undefined;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** stops everything and removes the database and DATA_DIR */
  close(): Promise<void>;
};

export async function startLivePlatform(env: Record<string, string> = {}): Promise<LivePlatform> {
  const database = await createTestDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'live-platform-'));
  const upstream = await startFakeOpenAi({ apiKey: 'router-test-key' });
  const configFor = (webPort: number, backendPort: number) =>
    loadConfig(
      {
        LOG_LEVEL: 'silent',
        DATA_DIR: dataDir,
        WEB_PORT: String(webPort),
        BACKEND_PORT: String(backendPort),
        PUBLIC_URL: `http://127.0.0.1:${webPort}`,
        INTERNAL_API_KEY: 'e2e-internal-key',
        HOSTING_DRIVER: 'local',
        AGENT_RUNTIME: 'builtin',
        AGENT_SANDBOX: testAgentSandbox(),
        ROUTER_BASE_URL: upstream.baseUrl,
        ROUTER_API_KEY: 'router-test-key',
        ...env,
      },
      { readDotEnv: false },
    );
  const config = configFor(await freePort(), await freePort());
  let current: { platform: Platform; web: App; backend: App } | undefined;

  const live: LivePlatform = {
    config,
    database,
    upstream,
    webUrl: `http://127.0.0.1:${config.WEB_PORT}`,
    running: () => current,
    async start() {
      const { config } = live;
      const platform = createPlatform({
        config,
        db: database.db,
        secrets: TEST_SECRETS,
        logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
        rateLimiter: createMemoryRateLimiter(),
      });
      const web = await platform.buildWebApp();
      const backend = await platform.buildBackendApp();
      try {
        await web.listen({ host: '127.0.0.1', port: config.WEB_PORT });
        await backend.listen({ host: '127.0.0.1', port: config.BACKEND_PORT });
      } catch (err) {
        await Promise.allSettled([web.close(), backend.close()]);
        await platform.close();
        throw err;
      }
      await platform.startWorkers();
      await platform.startChannels({ servesWeb: true }); // as src/main.ts does for `npm start`
      current = { platform, web, backend };
    },
    async stop() {
      if (!current) return;
      const r = current;
      current = undefined;
      await Promise.allSettled([r.web.close(), r.backend.close()]);
      await r.platform.close();
    },
    async close() {
      await live.stop();
      await upstream.close();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  // freePort() only names a port that was free a moment ago: another process (a test's client
  // socket, another test file) can take it before the platform binds it. The first start then
  // picks two new ports; a restart (stop, start) keeps the ones the test has seen.
  for (let attempt = 1; ; attempt++) {
    try {
      await live.start();
      return live;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt === 5) {
        await live.close();
        throw err;
      }
      live.config = configFor(await freePort(), await freePort());
      live.webUrl = `http://127.0.0.1:${live.config.WEB_PORT}`;
    }
  }
}

/**
 * Named users of a live platform's web app, each with the session cookie its last answer set:
 * `api(who, …)` sends `who`'s cookie, `signIn(who, email)` registers and signs that user in.
 * `webUrl` is read at each call (the platform is started in a beforeAll).
 */
export function liveUsers(webUrl: () => string) {
  const cookies: Record<string, string> = {};
  async function api(who: string, method: string, path: string, body?: unknown) {
    const res = await fetch(`${webUrl()}${path}`, {
      method,
      headers: { cookie: cookies[who] ?? '', ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const m = /service-session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '');
    if (m) cookies[who] = `service-session=${m[1]}`;
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  }
  async function signIn(who: string, email: string) {
    expect((await api(who, 'POST', '/api/register', { email, password: 'correct horse battery' })).status).toBe(201);
    expect((await api(who, 'POST', '/api/auth/login', { email, password: 'correct horse battery' })).status).toBe(200);
  }
  return { api, signIn, cookies };
}
