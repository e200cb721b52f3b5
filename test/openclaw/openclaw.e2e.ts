/**
 * OpenClaw for real (`npm run test:openclaw`; CI runs it as its own pass after `npm test`; not part
 * of `npm test`: it needs OpenClaw installed, ~650 MB, and an agent takes ~10 s and ~1 GB to start).
 * With AGENT_RUNTIME=openclaw and the local driver (bubblewrap sandbox and pasta's network
 * namespace where the host has them), an agent provisioned through the web API:
 *
 * - reaches `running`, as one OpenClaw process in its own network namespace, and answers its health
 *   check (`/healthz`) at the address the platform has for it: the gateway port in its
 *   configuration file; the `websocketUrl` the platform gives reaches OpenClaw's gateway;
 * - has its configuration where OpenClaw reads it (OPENCLAW_CONFIG_PATH), with the §8 "Agent
 *   container settings", passing OpenClaw's own `config validate`, and no secret in it or on a
 *   command line;
 * - answers the dashboard chat (§4.18 `POST /api/chat`, streamed and not) and an OpenAI-compatible
 *   chat through the platform's agent proxy with an `sk_` key (`model: "default"` as the Connect
 *   snippet sends it, the listed model; streamed and not), its model calls going through the
 *   platform's AI gateway to the local fake provider; and its own gateway only with its token;
 * - comes back after a restart through the API, and is gone after a delete.
 *
 * With OPENCLAW_TEST_ROUNDS (default 2; 0 in CI) it also measures the start time: provision →
 * `running` through the platform, against the runtime's own start (OpenClaw run directly with the
 * same kind of configuration, no platform, no sandbox; /healthz polled every 10 ms), alternating,
 * and writes the figures to bench/results/openclaw.json (docs/benchmarks.md "OpenClaw").
 *
 * A failing test prints the end of the agent's process log (OpenClaw's own lines).
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import OpenAI, { BadRequestError } from 'openai';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Config, loadConfig } from '../../src/config/env.ts';
import { LIMITS } from '../../src/config/limits.ts';
import { freePort } from '../../src/db/embedded.ts';
import { probeHealthz } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import { findOnPath } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
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
const roundsEnv = Number(process.env.OPENCLAW_TEST_ROUNDS ?? 2);
/** timed rounds against OpenClaw alone; 0: one provisioning, nothing timed or written */
const ROUNDS = Number.isInteger(roundsEnv) && roundsEnv >= 0 ? roundsEnv : 2;
const ROUTER_KEY = 'router-test-key';
/**
 * What the fake provider answers. A real model answers in its own words; the fake's default echo
 * would repeat OpenClaw's internal context block (the last user message OpenClaw sends it), which
 * OpenClaw strips from its final text, so the streamed text would not be a prefix of it and OpenClaw
 * ends such a stream with its own error event ("cannot be represented as an append-only response stream")
 */
const REPLY = 'pong from the fake provider';

let database: TestDatabase;
let dataDir: string;
let upstream: FakeOpenAi;
let config: Config;
let running: { platform: Platform; web: App; backend: App } | undefined;
let webUrl: string;
let cookie = '';
let apiKey = '';
let agentId = '';

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

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Every process whose environment names the agent (the sandboxed runtime and its children). */
function agentPids(id: string): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`AGENT_ID=${id}`);
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

/** The local driver's record of the agent (driver-state.json: pid, port, network; no secret). */
const driverState = (id: string) =>
  JSON.parse(readFileSync(join(dataDir, 'agents', id, 'driver-state.json'), 'utf8')) as {
    pid: number;
    port: number;
    url: string;
    network?: { nsFile: string };
  };

/** The address the platform reaches the agent's gateway at (what its health checks, chat and proxy use). */
async function gatewayUrl(id: string): Promise<string> {
  const row = await database.db.kysely.selectFrom('agents').select(['gateway_url']).where('id', '=', id).executeTakeFirstOrThrow();
  expect(row.gateway_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  return row.gateway_url!;
}

async function gatewayToken(id: string): Promise<string> {
  const creds = await database.db.kysely.selectFrom('agent_credentials').selectAll().where('agent_id', '=', id).executeTakeFirstOrThrow();
  return decryptSecret(TEST_SECRETS.secretsEncryptionKey, creds.gateway_token_enc);
}

/** The end of the agent's process log: OpenClaw's own lines (and pasta's). */
function processLogTail(id: string, lines = 60): string {
  const dir = join(dataDir, 'agents', id, 'logs');
  const text = ['process.log.1', 'process.log'].map((f) => (existsSync(join(dir, f)) ? readFileSync(join(dir, f), 'utf8') : '')).join('');
  return text.split('\n').slice(-lines).join('\n');
}

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
    AGENT_MODEL_API_KEY: ROUTER_KEY,
    NODE_COMPILE_CACHE: join(dir, 'home', '.cache', 'node-compile'),
    ...OPENCLAW_ENV,
  };
  const t0 = performance.now();
  const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', launcher, 'gateway', 'run'], {
    env,
    detached: true,
    stdio: 'ignore',
  });
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

/** Provisions an agent through the web API and waits until it is `running`; its id. */
async function provisionRunning(name: string): Promise<string> {
  const prov = await api('POST', '/api/agents/provision', { name, model: 'gpt-4' });
  expect(prov.status, JSON.stringify(prov.body)).toBe(201);
  const id = prov.body.agent.id as string;
  agentId = id;
  await eventually(
    async () => {
      const a = (await api('GET', `/api/agents/${id}`)).body.agent;
      if (a?.status === 'error') throw new Error(`provisioning failed; the agent's log:\n${processLogTail(id)}`);
      return a?.status === 'running';
    },
    180_000,
    50,
  );
  return id;
}

beforeAll(async () => {
  if (!existsSync(launcher))
    throw new Error(`OpenClaw is not installed in ${installedIn}/openclaw: run npm run runtime:openclaw (npm run test:openclaw does)`);
  database = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'openclaw-e2e-'));
  symlinkSync(join(installedIn, 'openclaw'), join(dataDir, 'openclaw'));
  upstream = await startFakeOpenAi({ apiKey: ROUTER_KEY, reply: REPLY });
  const [webPort, backendPort] = [await freePort(), await freePort()];
  config = loadConfig(
    {
      LOG_LEVEL: 'silent',
      DATA_DIR: dataDir,
      WEB_PORT: String(webPort),
      BACKEND_PORT: String(backendPort),
      PUBLIC_URL: `http://127.0.0.1:${webPort}`,
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
  const key = await api('POST', '/api/keys', { name: 'openclaw e2e' });
  expect(key.status).toBe(201);
  apiKey = key.body.key;
}, 120_000);

beforeEach((ctx) => {
  ctx.onTestFailed(() => {
    if (agentId && dataDir) console.error(`the agent's process log (${agentId}), last lines:\n${processLogTail(agentId)}`);
  });
});

afterAll(async () => {
  if (running) {
    await Promise.allSettled([running.web.close(), running.backend.close()]);
    await running.platform.close();
  }
  await upstream?.close();
  await database?.drop();
  // OPENCLAW_TEST_KEEP=1 keeps DATA_DIR (agent logs: agents/<id>/logs/process.log) for a look after a failure
  if (dataDir && !process.env.OPENCLAW_TEST_KEEP) rmSync(dataDir, { recursive: true, force: true });
});

describe('AGENT_RUNTIME=openclaw end to end (local driver, real OpenClaw)', () => {
  const provisionMs: number[] = [];
  const bareMs: number[] = [];

  it('an agent provisioned through the web API reaches running and answers its health check where the platform reaches it', async () => {
    for (let round = 0; round < Math.max(1, ROUNDS); round++) {
      if (ROUNDS > 0) bareMs.push(await runtimeStartMs(round));
      if (agentId) {
        const previous = agentId;
        expect((await api('DELETE', `/api/agents/${previous}`)).body).toMatchObject({ deleted: true });
        await eventually(async () => agentPids(previous).length === 0, 30_000, 100);
      }
      const t0 = performance.now();
      await provisionRunning(`OpenClaw agent ${round}`);
      provisionMs.push(performance.now() - t0);
    }
    // the platform's address for the gateway is the port OpenClaw listens on (its configuration's), and it answers live there
    const url = await gatewayUrl(agentId);
    const state = driverState(agentId);
    expect(state.url).toBe(url);
    const cfg = JSON.parse(readFileSync(join(dataDir, 'agents', agentId, 'openclaw.json'), 'utf8'));
    expect(cfg.gateway.port).toBe(Number(new URL(url).port));
    expect(await (await fetch(`${url}/healthz`)).json()).toMatchObject({ ok: true, status: 'live' });
    // one OpenClaw process, the one the platform tracks (a stop's SIGTERM reaches the gateway itself)
    const openclaws = agentPids(agentId).filter((pid) => {
      try {
        const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
        return comm.startsWith('openclaw') || readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('openclaw.mjs');
      } catch {
        return false; // a worker that ended meanwhile
      }
    });
    expect(openclaws).toEqual([state.pid]);
    const stats = (await api('GET', `/api/agents/${agentId}/stats`)).body.stats as { memory: number; pids: number };
    expect(stats.memory).toBeGreaterThan(50 * 1024 * 1024);

    if (ROUNDS === 0) return;
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
  }, 900_000);

  it("it runs in its own network namespace: the platform's backend port reaches it, the web port and PostgreSQL do not", async (ctx) => {
    const state = driverState(agentId);
    const nsenter = findOnPath('nsenter');
    // pasta's namespace needs root and Debian's passt (docs/security.md "Network"); without them the host's network is shared
    if (!state.network || !nsenter) return ctx.skip();
    const pid = state.pid;
    expect(readlinkSync(`/proc/${pid}/ns/net`)).not.toBe(readlinkSync('/proc/self/ns/net'));
    const probe = (port: number) =>
      spawnSync(
        nsenter,
        [
          `--net=${state.network!.nsFile}`,
          '--',
          process.execPath,
          '-e',
          `const s=require('net').connect(${port},'127.0.0.1');s.on('connect',()=>process.exit(0));s.on('error',()=>process.exit(3));setTimeout(()=>process.exit(4),3000)`,
        ],
        { timeout: 10_000 },
      ).status;
    expect(probe(config.BACKEND_PORT)).toBe(0);
    expect(probe(config.WEB_PORT)).not.toBe(0);
    expect(probe(5432)).not.toBe(0);
  }, 60_000);

  it('its configuration is where OpenClaw reads it, holds the §8 settings, validates, and holds no secret', async () => {
    const pids = agentPids(agentId);
    expect(pids.length).toBeGreaterThan(0);
    const env = environOf(driverState(agentId).pid);
    const file = join(dataDir, 'agents', agentId, 'openclaw.json');
    expect(env.OPENCLAW_CONFIG_PATH).toBe(file);
    expect(env.OPENCLAW_CONFIG_READONLY).toBe('1');
    const raw = readFileSync(file, 'utf8');
    const cfg = JSON.parse(raw);
    const port = Number(new URL(await gatewayUrl(agentId)).port);

    expect(cfg.tools.profile).toBe(env.AGENT_PLAN === 'solo' ? 'messaging' : 'coding');
    expect(cfg.tools.deny).toEqual(expect.arrayContaining(['browser', 'canvas']));
    expect(cfg.tools.exec).toMatchObject({ security: 'allowlist', ask: 'off' });
    expect(cfg.tools.fs).toEqual({ workspaceOnly: true });
    // §8 tool limits and the §2 skill limit, in OpenClaw's keys (docs/agents.md "OpenClaw")
    expect(cfg.tools.web.fetch).toMatchObject({ maxChars: 50_000, maxCharsCap: 50_000 });
    expect(cfg.tools.loopDetection).toEqual({ enabled: true });
    expect(cfg.agents.defaults.imageMaxDimensionPx).toBe(1200);
    expect(cfg.agents.defaults.skills).toEqual([]);
    expect(cfg.skills.limits.maxSkillsInPrompt).toBe(LIMITS.planSkillLimit[env.AGENT_PLAN ?? 'solo'] ?? 3);
    expect(cfg.gateway).toMatchObject({
      mode: 'local',
      port,
      bind: 'loopback',
      auth: { mode: 'token', allowTailscale: true, token: { source: 'env', provider: 'default', id: 'OPENCLAW_GATEWAY_TOKEN' } },
      trustedProxies: ['127.0.0.1'],
      http: { endpoints: { chatCompletions: { enabled: true } } },
      controlUi: { enabled: true, allowedOrigins: ['*'] },
    });
    // its model: the agent's own, on the platform's AI gateway (docs/agents.md "Model access"), never the provider
    expect(env.AGENT_MODEL_BASE_URL).toContain(`127.0.0.1:${config.BACKEND_PORT}`);
    expect(cfg.agents.defaults).toMatchObject({
      model: `platform/${env.AGENT_MODEL}`,
      workspace: join(dataDir, 'agents', agentId, 'workspace'),
    });
    expect(cfg.models.providers.platform).toMatchObject({
      baseUrl: env.AGENT_MODEL_BASE_URL,
      api: 'openai-completions',
      apiKey: { source: 'env', id: 'AGENT_MODEL_API_KEY' },
    });
    expect(cfg).toMatchObject({
      update: { checkOnStart: false },
      telemetry: { enabled: false },
      models: { catalogRefresh: { enabled: false } },
    });

    // secrets: in the environment only, never in the file or on a command line
    const token = await gatewayToken(agentId);
    expect(raw).not.toContain(token);
    expect(raw).not.toContain(env.AGENT_MODEL_API_KEY);
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

  it("the websocketUrl the platform gives reaches OpenClaw's gateway (its connect challenge)", async () => {
    const { websocketUrl } = (await api('GET', `/api/agents/${agentId}`)).body.agent as { websocketUrl: string };
    expect(websocketUrl).toBe(`${webUrl.replace(/^http/, 'ws')}/api/agents/${agentId}/ws`);
    const first = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const ws = new WebSocket(websocketUrl, { headers: { authorization: `Bearer ${apiKey}` } });
      const timer = setTimeout(() => reject(new Error('no message from the gateway in 30 s')), 30_000);
      ws.on('message', (raw: Buffer) => {
        clearTimeout(timer);
        ws.close();
        resolve(JSON.parse(raw.toString('utf8')));
      });
      ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
      ws.on('error', reject);
    });
    expect(first).toMatchObject({ type: 'event', event: 'connect.challenge' });
  }, 60_000);

  it('answers the dashboard chat (POST /api/chat), streamed and not, through the platform’s AI gateway', async () => {
    const before = upstream.requests.length;
    const plain = await api('POST', '/api/chat', { agentId, messages: [{ role: 'user', content: 'ping from the dashboard' }] });
    expect(plain.status, JSON.stringify(plain.body)).toBe(200);
    expect(plain.body).toMatchObject({ reply: REPLY, agentId });

    const res = await fetch(`${webUrl}/api/chat`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ agentId, messages: [{ role: 'user', content: 'streamed ping' }] }),
    });
    expect(res.status).toBe(200);
    const events = await res.text();
    expect(events).toContain('event: delta');
    expect(events).not.toContain('event: error');
    expect(events).toContain(`event: done\ndata: {"reply":"${REPLY}"`);

    // OpenClaw called its model through the platform's AI gateway, which called the provider with the operator's key
    const sent = upstream.requests.slice(before).filter((r) => r.path === '/v1/chat/completions');
    expect(sent.length).toBeGreaterThanOrEqual(2);
    expect(sent.every((r) => r.authorization === `Bearer ${ROUTER_KEY}`)).toBe(true);
    expect(sent.some((r) => JSON.stringify(r.body.messages).includes('ping from the dashboard'))).toBe(true);
    expect(sent.some((r) => JSON.stringify(r.body.messages).includes('streamed ping'))).toBe(true);
    // both turns are stored (docs/agents.md "Who stores turns")
    const history = (await api('GET', `/api/agents/${agentId}/messages`)).body.messages as { content: string }[];
    expect(history.map((m) => m.content)).toEqual(expect.arrayContaining(['ping from the dashboard', 'streamed ping', REPLY]));
  }, 180_000);

  it('answers an OpenAI-compatible chat through the agent proxy (the Connect snippet: model "default", an sk_ key), streamed and not', async () => {
    const client = new OpenAI({ apiKey, baseURL: `${webUrl}/api/agents/${agentId}/v1` });
    const completion = await client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: 'hi' }] });
    expect(completion.choices[0]!.message).toMatchObject({ role: 'assistant', content: REPLY });

    const stream = await client.chat.completions.create({
      model: 'default',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'hi, streamed' }],
    });
    let text = '';
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      usage ??= chunk.usage ?? undefined;
    }
    expect(text).toBe(REPLY);
    expect(usage).toMatchObject({ total_tokens: expect.any(Number) });

    // the model the platform lists for it is the agent too
    const listed = (await client.models.list()).data.map((m) => m.id);
    expect(listed).toContain('default');
    const own = await client.chat.completions.create({ model: listed[0]!, messages: [{ role: 'user', content: 'hi' }] });
    expect(own.choices[0]!.message.content).toBe(REPLY);
    // a model that is not the agent's reaches OpenClaw as sent, and its refusal says what it accepts
    const refused = await client.chat.completions
      .create({ model: 'some/other-model', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BadRequestError);
    expect((refused as BadRequestError).message).toContain('Use `openclaw` or `openclaw/<agentId>`');
  }, 180_000);

  it('its own gateway answers only with its token (Authorization: Bearer, as OpenClaw documents)', async () => {
    const url = `${await gatewayUrl(agentId)}/v1/chat/completions`;
    const body = JSON.stringify({ model: 'openclaw', messages: [{ role: 'user', content: 'ping' }] });
    const send = (token: string) =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body });
    expect((await send('wrong-token')).status).toBe(401);
    const res = await send(await gatewayToken(agentId));
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { object: string; choices: { message: { role: string; content: string } }[] };
    expect(answer.object).toBe('chat.completion');
    expect(answer.choices[0]!.message).toEqual({ role: 'assistant', content: REPLY });
  }, 180_000);

  it('a restart through the API brings it back on its configuration, and it answers again', async () => {
    const userId = (await api('GET', '/api/auth/session')).body.user.id as string;
    const before = agentPids(agentId);
    expect((await api('POST', `/api/instance/${userId}/restart`, { agentId })).status).toBe(200);
    await eventually(
      async () => {
        const a = (await api('GET', `/api/agents/${agentId}`)).body.agent;
        if (a?.status !== 'running' || agentPids(agentId).some((p) => before.includes(p))) return null;
        return probeHealthz(await gatewayUrl(agentId), 1_000);
      },
      120_000,
      200,
    );
    const cfg = JSON.parse(readFileSync(join(dataDir, 'agents', agentId, 'openclaw.json'), 'utf8'));
    expect(cfg.gateway.port).toBe(Number(new URL(await gatewayUrl(agentId)).port));
    const client = new OpenAI({ apiKey, baseURL: `${webUrl}/api/agents/${agentId}/v1` });
    const again = await client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: 'still there?' }] });
    expect(again.choices[0]!.message.content).toBe(REPLY);
  }, 300_000);

  it('delete stops every process of the agent', async () => {
    const deleted = await api('DELETE', `/api/agents/${agentId}`);
    expect(deleted.body).toMatchObject({ deleted: true });
    await eventually(async () => agentPids(agentId).length === 0, 30_000, 100);
  }, 60_000);
});
