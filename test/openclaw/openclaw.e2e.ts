/**
 * OpenClaw for real (`npm run test:openclaw`; not part of `npm test`: it needs OpenClaw installed,
 * ~650 MB, and an agent takes ~10 s and ~1 GB to start). With AGENT_RUNTIME=openclaw and the local
 * driver (bubblewrap sandbox when the host has it), an agent provisioned through the web API
 * reaches `running`; its configuration file, where OpenClaw reads it (OPENCLAW_CONFIG_PATH), holds
 * the §8 "Agent container settings" and passes OpenClaw's own `config validate`; no token is on a
 * command line or in the file; and it answers an OpenAI-compatible chat through its gateway with
 * a local fake model provider.
 *
 * It also measures the start time: provision → `running` through the platform, against the
 * runtime's own start (OpenClaw run directly with the same kind of configuration, no platform, no
 * sandbox; /healthz polled every 10 ms), alternating, OPENCLAW_TEST_ROUNDS rounds (default 2), and
 * writes the figures to bench/results/openclaw.json (docs/benchmarks.md "OpenClaw").
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../../src/config/env.ts';
import { freePort } from '../../src/db/embedded.ts';
import { probeHealthz } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import { buildOpenClawConfig, OPENCLAW_ENV } from '../../src/domains/agents/drivers/openclaw-config.rules.ts';
import type { App } from '../../src/http/shared/base-app.ts';
import { decryptSecret } from '../../src/lib/crypto.ts';
import { createMemoryRateLimiter } from '../../src/lib/rate-limiter.ts';
import { createPlatform, type Platform } from '../../src/platform.ts';
import { eventually } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { testAgentSandbox } from '../helpers/agent-sandbox.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { TEST_SECRETS } from '../helpers/platform.ts';

const installedIn = resolve(process.env.OPENCLAW_TEST_DATA_DIR ?? process.env.DATA_DIR ?? 'data');
const launcher = join(installedIn, 'openclaw', 'node_modules', 'openclaw', 'openclaw.mjs');
const ROUNDS = Math.max(1, Number(process.env.OPENCLAW_TEST_ROUNDS ?? 2) || 2);
const ROUTER_KEY = 'router-test-key';

let database: TestDatabase;
let dataDir: string;
let upstream: FakeOpenAi;
let config: Config;
let running: { platform: Platform; web: App; backend: App } | undefined;
let webUrl: string;
let cookie = '';

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${webUrl}${path}`, {
    method,
    headers: { cookie, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const m = /service-session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '');
  if (m) cookie = `service-session=${m[1]}`;
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

const gatewayBase = (websocketUrl: string) => websocketUrl.replace(/^ws/, 'http').replace(/\/ws$/, '');
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Every process whose environment names the agent (the sandboxed runtime and its children). */
function agentPids(agentId: string): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`AGENT_ID=${agentId}`);
      } catch {
        return false;
      }
    });
}
const environOf = (pid: number) =>
  Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
  );

/**
 * The runtime's own start: OpenClaw's gateway run directly by Node 24 (no platform, no sandbox)
 * with a configuration of the same kind and a fresh compile cache (a new agent's is empty too),
 * until /healthz answers live.
 */
async function runtimeStartMs(round: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), `openclaw-bare-${round}-`));
  const port = await freePort();
  const workspace = join(dir, 'workspace');
  mkdirSync(workspace);
  const configPath = join(dir, 'openclaw.json');
  const cfg = buildOpenClawConfig(
    {},
    { plan: 'solo', workspace, port, bind: 'loopback', modelBaseUrl: upstream.baseUrl, modelApiKey: true, model: 'gpt-4' },
  );
  writeFileSync(configPath, JSON.stringify(cfg));
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: join(dir, 'home'),
    OPENCLAW_STATE_DIR: join(dir, 'home', '.openclaw'),
    OPENCLAW_CONFIG_PATH: configPath,
    OPENCLAW_GATEWAY_TOKEN: 'b'.repeat(48),
    OPENCLAW_NO_RESPAWN: '1',
    AGENT_MODEL_API_KEY: ROUTER_KEY,
    NODE_COMPILE_CACHE: join(dir, 'home', '.cache', 'node-compile'),
    ...OPENCLAW_ENV,
  };
  const t0 = performance.now();
  const child = spawn(process.execPath, [launcher, 'gateway', 'run'], { env, detached: true, stdio: 'ignore' });
  try {
    const deadline = Date.now() + 120_000;
    while (!(await probeHealthz(`http://127.0.0.1:${port}`, 1_000))) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`OpenClaw did not start (exit ${child.exitCode})`);
      await new Promise((r) => setTimeout(r, 10));
    }
    return performance.now() - t0;
  } finally {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
    await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
    rmSync(dir, { recursive: true, force: true });
  }
}

async function startPlatform() {
  const platform = createPlatform({
    config,
    db: database.db,
    secrets: TEST_SECRETS,
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    rateLimiter: createMemoryRateLimiter(),
  });
  const web = await platform.buildWebApp();
  const backend = await platform.buildBackendApp();
  await web.listen({ host: '127.0.0.1', port: config.WEB_PORT });
  await backend.listen({ host: '127.0.0.1', port: config.BACKEND_PORT });
  await platform.startWorkers();
  running = { platform, web, backend };
}

beforeAll(async () => {
  if (!existsSync(launcher))
    throw new Error(`OpenClaw is not installed in ${installedIn}/openclaw: run npm run runtime:openclaw (npm run test:openclaw does)`);
  database = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'openclaw-e2e-'));
  symlinkSync(join(installedIn, 'openclaw'), join(dataDir, 'openclaw'));
  upstream = await startFakeOpenAi({ apiKey: ROUTER_KEY });
  const [webPort, backendPort] = [await freePort(), await freePort()];
  config = loadConfig(
    {
      LOG_LEVEL: 'silent',
      DATA_DIR: dataDir,
      WEB_PORT: String(webPort),
      BACKEND_PORT: String(backendPort),
      INTERNAL_API_KEY: 'openclaw-e2e-internal-key',
      ADMIN_EMAILS: 'root@example.com',
      HOSTING_DRIVER: 'local',
      AGENT_RUNTIME: 'openclaw',
      AGENT_SANDBOX: testAgentSandbox(),
      ROUTER_BASE_URL: upstream.baseUrl,
      ROUTER_API_KEY: ROUTER_KEY,
    },
    { readDotEnv: false },
  );
  webUrl = `http://127.0.0.1:${webPort}`;
  await startPlatform();
  expect((await api('POST', '/api/register', { email: 'root@example.com', password: 'correct horse battery' })).status).toBe(201);
  expect((await api('POST', '/api/auth/login', { email: 'root@example.com', password: 'correct horse battery' })).status).toBe(200);
}, 120_000);

afterAll(async () => {
  if (running) {
    await Promise.allSettled([running.web.close(), running.backend.close()]);
    await running.platform.close();
  }
  await upstream?.close();
  await database?.drop();
  // OPENCLAW_TEST_KEEP=1 keeps DATA_DIR (agent logs: agents/<id>/workspace/logs/process.log) for a look after a failure
  if (dataDir && !process.env.OPENCLAW_TEST_KEEP) rmSync(dataDir, { recursive: true, force: true });
});

describe('AGENT_RUNTIME=openclaw end to end (local driver, real OpenClaw)', () => {
  let agentId: string;
  let agent: Record<string, any>;
  const provisionMs: number[] = [];
  const bareMs: number[] = [];

  it('an agent provisioned through the web API reaches running; its start is timed against OpenClaw alone', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      bareMs.push(await runtimeStartMs(round));
      if (agentId) {
        expect((await api('DELETE', `/api/agents/${agentId}`)).body).toMatchObject({ deleted: true });
        await eventually(async () => agentPids(agentId).length === 0, 30_000, 100);
      }
      const t0 = performance.now();
      const prov = await api('POST', '/api/agents/provision', { name: `OpenClaw agent ${round}`, model: 'gpt-4' });
      expect(prov.status).toBe(201);
      agentId = prov.body.agent.id;
      agent = await eventually(
        async () => {
          const a = (await api('GET', `/api/agents/${agentId}`)).body.agent;
          if (a?.status === 'error') throw new Error('provisioning failed (see the agent logs)');
          return a?.status === 'running' ? a : null;
        },
        180_000,
        50,
      );
      provisionMs.push(performance.now() - t0);
    }
    expect(await (await fetch(`${gatewayBase(agent.websocketUrl)}/healthz`)).json()).toMatchObject({ ok: true, status: 'live' });
    const stats = (await api('GET', `/api/agents/${agentId}/stats`)).body.stats as { memory: number; pids: number };
    expect(stats.memory).toBeGreaterThan(50 * 1024 * 1024);

    const results = {
      date: new Date().toISOString(),
      machine: `${cpus()[0]?.model ?? '?'}, ${cpus().length} cores, Node ${process.version}, load average ${loadavg()[0]!.toFixed(2)} at the end`,
      openclawVersion: JSON.parse(readFileSync(join(installedIn, 'openclaw', 'node_modules', 'openclaw', 'package.json'), 'utf8')).version,
      rounds: ROUNDS,
      provisionToRunningMs: provisionMs.map(Math.round),
      runtimeStartMs: bareMs.map(Math.round),
      provisionToRunningMedianMs: Math.round(median(provisionMs)),
      runtimeStartMedianMs: Math.round(median(bareMs)),
      ratio: Math.round((median(provisionMs) / median(bareMs)) * 100) / 100,
      residentMbJustStarted: Math.round(stats.memory / 1024 / 1024),
      tasks: stats.pids,
    };
    mkdirSync('bench/results', { recursive: true });
    writeFileSync('bench/results/openclaw.json', `${JSON.stringify(results, null, 2)}\n`);
    console.log(`OpenClaw start: ${JSON.stringify(results)}`);
  }, 600_000);

  it('its configuration is where OpenClaw reads it, holds the §8 settings, validates, and holds no secret', async () => {
    const pids = agentPids(agentId);
    expect(pids.length).toBeGreaterThan(0);
    const env = environOf(pids[0]!);
    const file = join(dataDir, 'agents', agentId, 'openclaw.json');
    expect(env.OPENCLAW_CONFIG_PATH).toBe(file);
    expect(env.OPENCLAW_CONFIG_READONLY).toBe('1');
    const raw = readFileSync(file, 'utf8');
    const cfg = JSON.parse(raw);
    const port = Number(new URL(gatewayBase(agent.websocketUrl)).port);

    expect(cfg.tools.profile).toBe(env.AGENT_PLAN === 'solo' ? 'messaging' : 'coding');
    expect(cfg.tools.deny).toEqual(expect.arrayContaining(['browser', 'canvas']));
    expect(cfg.tools.exec).toMatchObject({ security: 'allowlist', ask: 'off' });
    expect(cfg.tools.fs).toEqual({ workspaceOnly: true });
    expect(cfg.gateway).toMatchObject({
      mode: 'local',
      port,
      auth: { mode: 'token', allowTailscale: true, token: { source: 'env', provider: 'default', id: 'OPENCLAW_GATEWAY_TOKEN' } },
      trustedProxies: ['127.0.0.1'],
      http: { endpoints: { chatCompletions: { enabled: true } } },
      controlUi: { enabled: true, allowedOrigins: ['*'] },
    });
    expect(cfg.agents.defaults).toMatchObject({ model: 'platform/gpt-4', workspace: join(dataDir, 'agents', agentId, 'workspace') });
    expect(cfg.models.providers.platform).toMatchObject({
      baseUrl: upstream.baseUrl,
      api: 'openai-completions',
      apiKey: { source: 'env', id: 'AGENT_MODEL_API_KEY' },
    });
    expect(cfg).toMatchObject({
      update: { checkOnStart: false },
      telemetry: { enabled: false },
      models: { catalogRefresh: { enabled: false } },
    });

    // secrets: in the environment only, never in the file or on a command line
    const creds = await database.db.kysely
      .selectFrom('agent_credentials')
      .selectAll()
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    const token = decryptSecret(TEST_SECRETS.secretsEncryptionKey, creds.gateway_token_enc);
    expect(raw).not.toContain(token);
    expect(raw).not.toContain(ROUTER_KEY);
    for (const pid of pids) expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).not.toContain(token);
    // the agent's own user cannot change it (it is root's and mounted read-only in the sandbox)
    if (process.getuid?.() === 0 && statSync(join(dataDir, 'agents', agentId, 'workspace')).uid !== 0) {
      expect(statSync(file).uid).toBe(0);
      expect(statSync(file).mode & 0o022).toBe(0);
    }

    // OpenClaw's own schema accepts it
    const home = mkdtempSync(join(tmpdir(), 'openclaw-validate-'));
    try {
      const check = spawnSync(process.execPath, [launcher, 'config', 'validate'], {
        env: { PATH: process.env.PATH, HOME: home, OPENCLAW_CONFIG_PATH: file, NO_COLOR: '1' },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(`${check.stdout}${check.stderr}`).toContain('Config valid');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }, 90_000);

  it('answers an OpenAI-compatible chat through its gateway with the fake model provider', async () => {
    const creds = await database.db.kysely
      .selectFrom('agent_credentials')
      .selectAll()
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    const token = decryptSecret(TEST_SECRETS.secretsEncryptionKey, creds.gateway_token_enc);
    const url = `${gatewayBase(agent.websocketUrl)}/v1/chat/completions`;
    const body = JSON.stringify({ model: 'openclaw', messages: [{ role: 'user', content: 'ping' }] });
    const denied = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer wrong-token' },
      body,
    });
    expect(denied.status).toBe(401);
    const before = upstream.requests.length;
    upstream.reply = 'pong from the fake provider';
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body,
    });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { object: string; choices: { message: { role: string; content: string } }[] };
    expect(answer.object).toBe('chat.completion');
    expect(answer.choices[0]!.message).toEqual({ role: 'assistant', content: 'pong from the fake provider' });
    const sent = upstream.requests.slice(before);
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.at(-1)!.authorization).toBe(`Bearer ${ROUTER_KEY}`);
    expect(sent.at(-1)!.body.model).toBe('gpt-4');
    // OpenClaw adds its system prompt and context; the user's words reach the model among them
    expect(JSON.stringify(sent.at(-1)!.body.messages)).toContain('ping');
  }, 180_000);

  it('a restart through the API brings it back on its configuration, and it answers again', async () => {
    const userId = (await api('GET', '/api/auth/session')).body.user.id as string;
    const before = agentPids(agentId);
    expect((await api('POST', `/api/instance/${userId}/restart`, { agentId })).status).toBe(200);
    const creds = await database.db.kysely
      .selectFrom('agent_credentials')
      .selectAll()
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    const token = decryptSecret(TEST_SECRETS.secretsEncryptionKey, creds.gateway_token_enc);
    const again = await eventually(
      async () => {
        const a = (await api('GET', `/api/agents/${agentId}`)).body.agent;
        if (a?.status !== 'running' || agentPids(agentId).some((p) => before.includes(p))) return null;
        return (await probeHealthz(gatewayBase(a.websocketUrl), 1_000)) ? a : null;
      },
      120_000,
      200,
    );
    const res = await fetch(`${gatewayBase(again.websocketUrl)}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ model: 'openclaw', messages: [{ role: 'user', content: 'still there?' }] }),
    });
    expect(res.status).toBe(200);
  }, 180_000);

  it('delete stops every process of the agent', async () => {
    expect((await api('DELETE', `/api/agents/${agentId}`)).body).toMatchObject({ deleted: true });
    await eventually(async () => agentPids(agentId).length === 0, 30_000, 100);
  }, 60_000);
});
