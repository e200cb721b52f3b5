/**
 * The local driver running the built-in runtime as real child processes on real sockets: probes,
 * token auth and its lockout, chat through a fake OpenAI-compatible upstream (JSON, SSE and
 * WebSocket), the configuration file, logs and stats from the process, restart, stop and
 * suspend/resume (no process left, nothing frozen), re-adoption by a second driver instance, a
 * crash told to watchExits() at once, delete and shutdown.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { containerHealth, waitForHealthy } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import {
  type AgentDeploySpec,
  AgentNotDeployedError,
  type HostingDriver,
  type UnitExit,
} from '../../src/domains/agents/drivers/driver.contract.ts';
import { createHostingDriver } from '../../src/domains/agents/drivers/driver-registry.service.ts';
import { isAlive, processesOfUid, readEnviron, readProcStat } from '../../src/domains/agents/drivers/local/containment/proc.service.ts';
import { FIRST_AGENT_UID } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { localDriverConfig } from './local-config.ts';

const TOKEN_A = 'a'.repeat(24) + 'B'.repeat(24); // 48 chars, §8
const TOKEN_B = 'c'.repeat(48);

let dataDir: string;
let upstream: FakeOpenAi;
let driver: HostingDriver;
let urlA: string;

const specA = (): AgentDeploySpec => ({
  agentId: 'agent-a',
  userId: 'user-1',
  plan: 'collective',
  gatewayToken: TOKEN_A,
  platformApiKey: 'agent-scoped-key',
  backendUrl: 'http://127.0.0.1:9',
  sandboxUid: FIRST_AGENT_UID + 11,
  config: {
    logging: { level: 'debug' },
    agents: { defaults: { model: 'vendor/model-a' } },
    gateway: { bind: 'loopback', auth: { token: 'leak-me' } },
  },
  env: {
    AGENT_MODEL_BASE_URL: upstream.baseUrl,
    AGENT_MODEL_API_KEY: 'model-key',
    DATABASE_URL: 'postgres://platform-secret',
    INTERNAL_API_KEY: 'internal',
  },
});

const specB = (): AgentDeploySpec => ({
  agentId: 'agent-b',
  userId: 'user-2',
  plan: 'solo',
  gatewayToken: TOKEN_B,
  platformApiKey: 'agent-b-key',
  backendUrl: 'http://127.0.0.1:9',
  sandboxUid: FIRST_AGENT_UID + 12,
  config: {},
  // no model; the loopback exemption switched off so the lockout can be tested from 127.0.0.1
  env: { AGENT_AUTH_LOOPBACK_EXEMPT: 'false' },
});

const auth = (token: string) => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json' });
const chat = (url: string, token: string, body: unknown) =>
  fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: auth(token), body: JSON.stringify(body) });
const stateOf = (agentId: string) =>
  JSON.parse(readFileSync(join(dataDir, 'agents', agentId, 'driver-state.json'), 'utf8')) as { pid: number; uid?: number };
const pidOf = (agentId: string) => stateOf(agentId).pid;
/**
 * Every live process of the agent, as an operator would count them: its own uid's (sandboxed as
 * root), else those whose environment names it; with their /proc state (a frozen one reads `T`).
 */
function processesOf(agentId: string, uid: number | undefined): { pid: number; state: string }[] {
  const pids = uid !== undefined ? processesOfUid(uid) : [];
  for (const name of readdirSync('/proc')) {
    if (/^\d+$/.test(name) && readEnviron(Number(name))?.AGENT_ID === agentId) pids.push(Number(name));
  }
  return [...new Set(pids)]
    .map((pid) => ({ pid, state: readProcStat(pid)?.state ?? 'gone' }))
    .filter((p) => p.state !== 'gone' && p.state !== 'Z');
}
/** what watchExits() told */
const exits: { agentId: string; exit: UnitExit; at: number }[] = [];

async function until<T>(fn: () => Promise<T> | T, ok: (v: T) => boolean, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let v = await fn();
  while (!ok(v) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    v = await fn();
  }
  return v;
}

function wsRoundTrip(url: string, opts: { token?: string; header?: string }, messages: unknown[]): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const q = opts.token ? `?token=${encodeURIComponent(opts.token)}` : '';
    const ws = new WebSocket(`${url.replace('http', 'ws')}/ws${q}`, {
      headers: opts.header ? { authorization: `Bearer ${opts.header}` } : {},
    });
    const got: unknown[] = [];
    ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.on('error', reject);
    ws.on('open', () => ws.send(JSON.stringify(messages[0])));
    ws.on('message', (data) => {
      got.push(JSON.parse(String(data)));
      if (got.length === messages.length) {
        ws.close();
        resolve(got);
      } else ws.send(JSON.stringify(messages[got.length]));
    });
  });
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'local-driver-'));
  upstream = await startFakeOpenAi({ apiKey: 'model-key' });
  driver = createHostingDriver(localDriverConfig(dataDir), { stopGraceMs: 3_000 });
  driver.watchExits!((agentId, exit) => exits.push({ agentId, exit, at: Date.now() }));
  const [a, b] = await Promise.all([driver.deploy(specA()), driver.deploy(specB())]);
  urlA = a.url;
  expect(a.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  expect(b.status).toBe('starting');
  const [okA, okB] = await Promise.all([
    waitForHealthy(a.url, { timeoutMs: 20_000, intervalMs: 100, probeTimeoutMs: 1_000 }),
    waitForHealthy(b.url, { timeoutMs: 20_000, intervalMs: 100, probeTimeoutMs: 1_000 }),
  ]);
  expect(okA && okB).toBe(true);
});

afterAll(async () => {
  await driver?.shutdown();
  await upstream?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('local driver with the built-in runtime', () => {
  it('answers the §4.12 probes without a token and reports healthy', async () => {
    expect(await (await fetch(`${urlA}/healthz`)).json()).toEqual({ ok: true, status: 'live' });
    const ready = await fetch(`${urlA}/readyz`);
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { ready: boolean; failing: string[]; uptimeMs: number };
    expect(body.ready).toBe(true);
    expect(body.failing).toEqual([]);
    expect(body.uptimeMs).toBeGreaterThan(0);
    expect(await driver.status('agent-a')).toEqual({ status: 'healthy', url: urlA });
    expect((await containerHealth(driver, 'agent-a')).status).toBe('healthy');
    expect(await driver.status('nobody')).toEqual({ status: 'not_found' });
  });

  it('requires the gateway token on everything else (401 without or with a wrong one)', async () => {
    expect((await fetch(`${urlA}/v1/chat/completions`, { method: 'POST' })).status).toBe(401);
    expect((await chat(urlA, 'wrong-token', { messages: [{ role: 'user', content: 'x' }] })).status).toBe(401);
    expect((await fetch(`${urlA}/v1/stats`, { headers: { authorization: `Bearer ${TOKEN_B}` } })).status).toBe(401);
    // loopback is exempt from the lockout by default: far more than 10 failures still get 401, and the right token works
    for (let i = 0; i < 12; i++) expect((await fetch(`${urlA}/v1/stats`)).status).toBe(401);
    expect((await fetch(`${urlA}/v1/stats`, { headers: auth(TOKEN_A) })).status).toBe(200);
  });

  it('forwards a chat completion to the configured OpenAI-compatible upstream', async () => {
    const res = await chat(urlA, TOKEN_A, { messages: [{ role: 'user', content: 'hello agent' }] });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; model: string; choices: { message: { content: string } }[] };
    expect(body.object).toBe('chat.completion');
    expect(body.choices[0]!.message.content).toBe('Echo: hello agent');
    const seen = upstream.requests.at(-1)!;
    expect(seen.authorization).toBe('Bearer model-key');
    expect(seen.body.model).toBe('vendor/model-a'); // agents.defaults.model from the user's configuration
    expect((await chat(urlA, TOKEN_A, { messages: [] })).status).toBe(400);
  });

  it('streams a chat completion as server-sent events', async () => {
    const res = await chat(urlA, TOKEN_A, { model: 'vendor/other', stream: true, messages: [{ role: 'user', content: 'one two three' }] });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const text = await res.text();
    const content = text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? '')
      .join('');
    expect(content).toBe('Echo: one two three');
    expect(text.trim().endsWith('data: [DONE]')).toBe(true);
    expect(upstream.requests.at(-1)!.body.model).toBe('vendor/other');
  });

  it('chats over the WebSocket with the token in the query or the header, keeping the conversation', async () => {
    const replies = await wsRoundTrip(urlA, { token: TOKEN_A }, [
      { type: 'chat', content: 'first' },
      { type: 'chat', content: 'second' },
      { type: 'nonsense' },
    ]);
    expect(replies[0]).toEqual({ type: 'reply', content: 'Echo: first' });
    expect(replies[1]).toEqual({ type: 'reply', content: 'Echo: second' });
    expect((replies[2] as { type: string }).type).toBe('error');
    expect(upstream.requests.at(-1)!.body.messages!.map((m: { content: string }) => m.content)).toEqual(['first', 'Echo: first', 'second']);
    expect(await wsRoundTrip(urlA, { header: TOKEN_A }, [{ type: 'chat', content: 'hdr' }])).toEqual([
      { type: 'reply', content: 'Echo: hdr' },
    ]);
    await expect(wsRoundTrip(urlA, { token: 'wrong' }, [{ type: 'chat', content: 'x' }])).rejects.toThrow(/401/);
  });

  it('writes the configuration file with the §8 fixed settings over the user configuration, and no token', () => {
    const config = JSON.parse(readFileSync(join(dataDir, 'agents', 'agent-a', 'workspace', 'openclaw.json'), 'utf8'));
    expect(config.logging.level).toBe('debug'); // the user's choice
    expect(config.gateway.mode).toBe('local');
    expect(config.gateway.bind).toBe('lan'); // the user's `loopback` is overridden
    expect(config.gateway.auth).toEqual({ mode: 'token', allowTailscale: true });
    expect(config.gateway.trustedProxies).toEqual(['127.0.0.1']);
    expect(config.gateway.http.endpoints.chatCompletions.enabled).toBe(true);
    expect(config.tools.profile).toBe('coding'); // collective
    expect(config.tools.deny).toEqual(['browser', 'canvas']);
    expect(config.session.dmScope).toBe('per-channel-peer');
    expect(JSON.stringify(config)).not.toContain(TOKEN_A);
    const solo = JSON.parse(readFileSync(join(dataDir, 'agents', 'agent-b', 'workspace', 'openclaw.json'), 'utf8'));
    expect(solo.tools.profile).toBe('messaging');
  });

  it('never gives the agent the platform secrets, only its own credentials', () => {
    const env = readEnviron(pidOf('agent-a'))!;
    expect(env.AGENT_GATEWAY_TOKEN).toBe(TOKEN_A);
    expect(env.AGENT_PLATFORM_API_KEY).toBe('agent-scoped-key');
    for (const name of ['DATABASE_URL', 'INTERNAL_API_KEY', 'WALLET_ENCRYPTION_KEY', 'SECRETS_ENCRYPTION_KEY'])
      expect(env[name]).toBeUndefined();
    const state = readFileSync(join(dataDir, 'agents', 'agent-a', 'driver-state.json'), 'utf8');
    expect(state).not.toContain(TOKEN_A);
  });

  it('answers 503 with a clear error when no model is configured, and readiness says why', async () => {
    const b = (await driver.status('agent-b')).url!;
    const res = await chat(b, TOKEN_B, { messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(503);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('MODEL_NOT_CONFIGURED');
    // the owner is told what the platform lacks (its provider setting), not only the runtime's own variable
    expect(error.message).toContain('the platform has no model provider');
    expect(error.message).toContain('ROUTER_BASE_URL');
    const ready = (await (await fetch(`${b}/readyz`)).json()) as { ready: boolean; failing: string[] };
    expect(ready).toMatchObject({ ready: false, failing: ['model'] });
  });

  it('locks a client out with 429 after 10 failed attempts when it is not exempt', async () => {
    const b = (await driver.status('agent-b')).url!;
    for (let i = 0; i < 10; i++) expect((await fetch(`${b}/v1/stats`, { headers: auth('bad-token') })).status).toBe(401);
    const locked = await fetch(`${b}/v1/stats`, { headers: auth(TOKEN_B) }); // even the right token during the lockout
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(290);
    expect((await fetch(`${b}/healthz`)).status).toBe(200); // probes stay open
  });

  it('reads real logs from the runtime log file, with limit and level filter', async () => {
    const all = await driver.logs('agent-a', { limit: 100 });
    expect(all.some((l) => l.message === 'agent runtime listening' && l.level === 'info')).toBe(true);
    expect(all.some((l) => l.message === 'chat completion answered' && l.source === 'chat')).toBe(true);
    expect(all.every((l) => !Number.isNaN(Date.parse(l.timestamp)))).toBe(true);
    expect(JSON.stringify(all)).not.toContain(TOKEN_A);
    expect(await driver.logs('agent-a', { limit: 2 })).toHaveLength(2);
    const warnings = await driver.logs('agent-b', { limit: 50, level: 'warn' });
    expect(warnings.some((l) => l.message === 'gateway auth lockout started')).toBe(true);
    expect(warnings.every((l) => l.level === 'warn')).toBe(true);
  });

  it('reports real stats from /proc and the runtime counters', async () => {
    const stats = await until(
      () => driver.stats('agent-a'),
      (s) => (s.messagesProcessed ?? 0) >= 4,
    );
    expect(stats.status).toBe('healthy');
    expect(stats.memory).toBeGreaterThan(20 * 1024 * 1024);
    expect(stats.memoryPercent).toBeGreaterThan(0);
    expect(stats.cpu).toBeGreaterThanOrEqual(0);
    expect(stats.pids).toBeGreaterThanOrEqual(1);
    expect(stats.uptime).toBeGreaterThanOrEqual(0);
    expect(stats.messagesProcessed).toBeGreaterThanOrEqual(4);
    expect(stats.network.rxBytes).toBeGreaterThan(0);
    expect(stats.network.txBytes).toBeGreaterThan(0);
  });

  it('restarts into a new process on the same URL that keeps working', async () => {
    const before = pidOf('agent-a');
    await driver.restart('agent-a');
    const after = pidOf('agent-a');
    expect(after).not.toBe(before);
    expect(isAlive(before)).toBe(false);
    expect(await waitForHealthy(urlA, { timeoutMs: 15_000, intervalMs: 100 })).toBe(true);
    expect((await driver.status('agent-a')).url).toBe(urlA);
    const res = await chat(urlA, TOKEN_A, { messages: [{ role: 'user', content: 'after restart' }] });
    expect(res.status).toBe(200);
  });

  it('stop and suspend leave no process of the agent (none frozen, none holding memory); restart and resume start a new one', async () => {
    const { pid, uid } = stateOf('agent-a');
    expect(processesOf('agent-a', uid).map((p) => p.pid)).toContain(pid);
    await driver.stop!('agent-a');
    expect(processesOf('agent-a', uid)).toEqual([]);
    expect((await driver.status('agent-a')).status).toBe('stopped');
    await driver.restart('agent-a');
    expect(await waitForHealthy(urlA, { timeoutMs: 15_000, intervalMs: 100 })).toBe(true);

    const running = pidOf('agent-a');
    await driver.suspend('agent-a');
    // suspended = no process, its state on disk (docs/agents.md "Stop, suspend and restart"): never SIGSTOP
    expect(isAlive(running)).toBe(false);
    expect(processesOf('agent-a', uid)).toEqual([]);
    expect((await driver.status('agent-a')).status).toBe('suspended');
    await driver.resume('agent-a');
    expect(await waitForHealthy(urlA, { timeoutMs: 15_000, intervalMs: 100 })).toBe(true);
    expect((await driver.status('agent-a')).status).toBe('healthy');
    expect(pidOf('agent-a')).not.toBe(running);
    expect(processesOf('agent-a', uid).every((p) => p.state !== 'T' && p.state !== 't')).toBe(true);
    // what the driver ended itself is no exit to report
    expect(exits.filter((e) => e.agentId === 'agent-a')).toEqual([]);
  });

  it('a second platform instance re-adopts a running agent instead of restarting it', async () => {
    const pid = pidOf('agent-a');
    // the first instance is simply dropped (a crashed platform): a new one starts on the same DATA_DIR
    const second = createHostingDriver(localDriverConfig(dataDir));
    expect((await second.status('agent-a')).status).toBe('healthy');
    const adopted = await second.deploy(specA());
    expect(adopted).toEqual({ externalId: `local-${pid}`, url: urlA, status: 'healthy' });
    expect(pidOf('agent-a')).toBe(pid);
    // a changed configuration is not adopted: the process is replaced
    const changed = await second.deploy({ ...specA(), config: { logging: { level: 'warn' } } });
    expect(changed.externalId).not.toBe(`local-${pid}`);
    expect(isAlive(pid)).toBe(false);
    expect(await waitForHealthy(changed.url, { timeoutMs: 15_000, intervalMs: 100 })).toBe(true);
    // a third instance that has not deployed it cannot restart it from what the process holds: its
    // /proc/<pid>/environ is the agent's to rewrite (docs/security.md N4), so it asks for a fresh spec instead
    const dropped = createHostingDriver(localDriverConfig(dataDir));
    await expect(dropped.restart('agent-a')).rejects.toBeInstanceOf(AgentNotDeployedError);
    const third = createHostingDriver(localDriverConfig(dataDir), {
      loadSpec: async () => ({ ...specA(), config: { logging: { level: 'warn' } } }),
    });
    await third.restart('agent-a');
    expect(await waitForHealthy(changed.url, { timeoutMs: 15_000, intervalMs: 100 })).toBe(true);
    await third.shutdown(); // stops what it started
    expect((await driver.status('agent-a')).status).toBe('stopped');
    await expect(driver.restart('agent-a')).resolves.toBeUndefined(); // the first instance still has the launch spec in memory
    expect(await waitForHealthy(changed.url, { timeoutMs: 15_000, intervalMs: 100 })).toBe(true);
  });

  it('reports a crashed process as error, tells watchExits() at once, and restart without any launch spec as not deployed', async () => {
    const pid = pidOf('agent-b');
    const killedAt = Date.now();
    process.kill(pid, 'SIGKILL');
    const told = await until(
      () => exits.find((e) => e.agentId === 'agent-b'),
      (e) => e !== undefined,
      10_000,
    );
    expect(told!.at - killedAt).toBeLessThan(10_000);
    // the runtime's death, as the process the driver started (bwrap passes it on as 128 + 9) saw it
    expect(told!.exit.signal === 'SIGKILL' || told!.exit.code === 137).toBe(true);
    expect(
      (
        await until(
          () => driver.status('agent-b'),
          (s) => s.status !== 'healthy' && s.status !== 'running',
        )
      ).status,
    ).toBe('error');
    const fresh = createHostingDriver(localDriverConfig(dataDir));
    expect((await fresh.status('agent-b')).status).toBe('stopped');
    await expect(fresh.restart('agent-b')).rejects.toBeInstanceOf(AgentNotDeployedError);
  });

  it('delete stops the process and removes the agent; deleting again succeeds', async () => {
    const pid = pidOf('agent-a');
    await driver.delete('agent-a');
    expect(isAlive(pid)).toBe(false);
    expect(existsSync(join(dataDir, 'agents', 'agent-a'))).toBe(false);
    expect(await driver.status('agent-a')).toEqual({ status: 'not_found' });
    await expect(driver.delete('agent-a')).resolves.toBeUndefined();
    expect((await fetch(`${urlA}/healthz`).catch(() => undefined))?.ok).not.toBe(true);
  });
});
