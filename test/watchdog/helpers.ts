/**
 * Platforms for the watchdog tests: real PostgreSQL, the real local driver running the built-in
 * runtime as child processes, a fake OpenAI-compatible model upstream, and fake Telegram and
 * webhook receivers for the §6 notifications. Timings are milliseconds so the tests run fast.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { type Config, loadConfig } from '../../src/config/env.ts';
import type { Db } from '../../src/db/client.ts';
import { freePort } from '../../src/db/embedded.ts';
import type { HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import { createLocalDriver } from '../../src/domains/agents/drivers/local/local.driver.ts';
import type { WatchdogSettings } from '../../src/domains/watchdog/watchdog.service.ts';
import type { App } from '../../src/http/shared/base-app.ts';
import { decryptSecret } from '../../src/lib/crypto.ts';
import { createMemoryRateLimiter } from '../../src/lib/rate-limiter.ts';
import { createPlatform, type Platform } from '../../src/platform.ts';
import { eventually } from '../agents/helpers.ts';
import { testAgentSandbox } from '../helpers/agent-sandbox.ts';
import { signUp, TEST_SECRETS } from '../helpers/platform.ts';

export const BOT_TOKEN = '123456:watchdog-test-token';
export const CHAT_ID = '-1001234';

/** Fast timings: the §8 defaults scaled down (checks every 300 ms, repairs wait 100 ms, …). */
export const FAST: Partial<WatchdogSettings> = {
  checkIntervalMs: 300,
  degradedIntervalMs: 300,
  probeTimeoutMs: 1_000,
  repairStopWaitMs: 100,
  repairVerifyTimeoutMs: 10_000,
  leaseMs: 1_500,
  pollMs: 100,
};

export type RunningPlatform = { platform: Platform; web: App; backend: App; driver: HostingDriver; config: Config; close(): Promise<void> };

export async function startPlatform(options: {
  db: Db;
  dataDir: string;
  env: Record<string, string>;
  watchdog?: Partial<WatchdogSettings>;
  startWorkers?: boolean;
  watchdogEnabled?: boolean;
}): Promise<RunningPlatform> {
  const backendPort = await freePort();
  const config = loadConfig(
    {
      LOG_LEVEL: 'silent',
      DATA_DIR: options.dataDir,
      BACKEND_PORT: String(backendPort),
      INTERNAL_API_KEY: 'watchdog-internal-key',
      HOSTING_DRIVER: 'local',
      AGENT_RUNTIME: 'builtin',
      AGENT_SANDBOX: testAgentSandbox(),
      REGISTER_RATE_LIMIT: '100000',
      ...options.env,
    },
    { readDotEnv: false },
  );
  const driver = createLocalDriver({ dataDir: options.dataDir, runtime: 'builtin', sandbox: testAgentSandbox(), stopGraceMs: 500 });
  const platform = createPlatform({
    config,
    db: options.db,
    secrets: TEST_SECRETS,
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    rateLimiter: createMemoryRateLimiter(),
    driver,
    workerPollMs: 50,
    watchdogSettings: { ...FAST, ...options.watchdog },
    ...(options.watchdogEnabled === false ? { watchdogEnabled: false } : {}),
  });
  const web = await platform.buildWebApp();
  const backend = await platform.buildBackendApp();
  await web.ready();
  await backend.listen({ host: '127.0.0.1', port: backendPort });
  if (options.startWorkers !== false) await platform.startWorkers();
  return {
    platform,
    web,
    backend,
    driver,
    config,
    async close() {
      await Promise.allSettled([web.close(), backend.close()]);
      await platform.close();
    },
  };
}

export const bearer = { authorization: 'Bearer watchdog-internal-key' };

/** A user and a deployed agent that reached `running`; returns its id, owner and gateway token. */
export async function deployAgent(p: RunningPlatform, db: Db, user?: { id: string }) {
  const owner = user ?? (await signUp(p.web));
  const res = await p.backend.inject({
    method: 'POST',
    url: '/api/deployments',
    headers: bearer,
    payload: { userId: owner.id, name: 'Watched', plan: 'network' },
  });
  if (res.statusCode !== 202) throw new Error(`deploy failed: ${res.statusCode} ${res.body}`);
  const agentId = res.json().agent.id as string;
  await eventually(
    async () => {
      const a = (
        await p.backend.inject({ method: 'GET', url: `/api/agents/${agentId}`, headers: { ...bearer, 'x-user-id': owner.id } })
      ).json();
      if (a.status === 'error') throw new Error('deploy failed');
      return a.status === 'running';
    },
    60_000,
    50,
  );
  const creds = await db.kysely.selectFrom('agent_credentials').selectAll().where('agent_id', '=', agentId).executeTakeFirstOrThrow();
  return { agentId, owner, token: decryptSecret(TEST_SECRETS.secretsEncryptionKey, creds.gateway_token_enc) };
}

export const watchdogView = async (p: RunningPlatform, agentId: string, userId: string) =>
  (
    await p.backend.inject({ method: 'GET', url: `/api/agents/${agentId}/watchdog?limit=100`, headers: { ...bearer, 'x-user-id': userId } })
  ).json() as {
    state: string | null;
    repairAttempts: number;
    history: { kind: string; from: string | null; to: string | null; attempt: number | null; ok: boolean | null; detail: string | null }[];
  };

export const waitForState = (p: RunningPlatform, agentId: string, userId: string, state: string, timeoutMs = 30_000) =>
  eventually(
    async () => {
      const v = await watchdogView(p, agentId, userId);
      return v.state === state ? v : null;
    },
    timeoutMs,
    50,
  );

export const pidOf = (dataDir: string, agentId: string) =>
  JSON.parse(readFileSync(join(dataDir, 'agents', agentId, 'driver-state.json'), 'utf8')).pid as number;

export async function gatewayUrl(db: Db, agentId: string) {
  const a = await db.kysely.selectFrom('agents').select('gateway_url').where('id', '=', agentId).executeTakeFirstOrThrow();
  return a.gateway_url!;
}

export async function chat(db: Db, agentId: string, token: string, text: string) {
  const res = await fetch(`${await gatewayUrl(db, agentId)}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: text }] }),
  });
  return { status: res.status, body: (await res.json()) as { choices?: { message: { content: string } }[] } };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
