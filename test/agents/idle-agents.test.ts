/**
 * Idle agents sleep (docs/agents.md "Idle agents sleep"; §3 status `suspended`), on the real
 * platform: the real local driver running the built-in runtime (sandboxed where this machine can),
 * the fake OpenAI-compatible provider as the agents' model, AGENT_IDLE_SUSPEND_S=1.
 * - an agent without traffic for a second is suspended: status `suspended`, none of its processes
 *   left (bwrap included), its folder kept, the watchdog not counting it as broken;
 * - traffic wakes it and is answered, never refused: the dashboard chat, the agent proxy over HTTP
 *   and over WebSocket, a heartbeat that falls due;
 * - ten callers at once share one wake (one resume, one process);
 * - one whose unit is gone (its state removed, as after a platform restart) is deployed again by the wake;
 * - Stop of a sleeping agent stops it; Start runs it.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { processTree } from '../../src/domains/agents/drivers/local/containment/proc.service.ts';
import { createLocalDriver } from '../../src/domains/agents/drivers/local/local.driver.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { testAgentSandbox } from '../helpers/agent-sandbox.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from './helpers.ts';

let t: AgentsTestPlatform<ReturnType<typeof createLocalDriver>>;
let upstream: FakeOpenAi;
let dataDir: string;
let webUrl: string;
let cookie: string;
let userId: string;
let key: string;
let agentId: string;
/** every resume() the platform asked of the driver, by agent */
const resumes: string[] = [];

const status = async () =>
  (await t.web.inject({ method: 'GET', url: `/api/agents/${agentId}`, headers: { cookie } })).json().agent.status as string;
const waitFor = (want: string, timeoutMs = 15_000) => eventually(async () => (await status()) === want, timeoutMs, 25);
const statePid = () => JSON.parse(readFileSync(join(dataDir, 'agents', agentId, 'driver-state.json'), 'utf8')).pid as number;
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** `pid` and every process below it, from /proc (the local driver's own reading) */
const tree = (pid: number): number[] => processTree(pid).map((s) => s.pid);

/** Sleeping, with none of its processes left: resolves with the processes it had while awake. */
async function asleep(): Promise<number[]> {
  await eventually(async () => (await status()) === 'running' || (await status()) === 'suspended', 15_000, 25);
  const before = existsSync(join(dataDir, 'agents', agentId, 'driver-state.json')) ? tree(statePid()) : [];
  await waitFor('suspended');
  await eventually(async () => before.every((p) => !alive(p)), 10_000, 25);
  return before;
}

const lastActive = async () =>
  (
    await t.database.db.kysely.selectFrom('agents').select('last_active_at').where('id', '=', agentId).executeTakeFirstOrThrow()
  ).last_active_at!.getTime();

const chat = (content: string) =>
  t.web.inject({
    method: 'POST',
    url: '/api/chat',
    headers: { cookie },
    payload: { agentId, messages: [{ role: 'user', content }] },
  });

beforeAll(async () => {
  upstream = await startFakeOpenAi({ apiKey: 'router-idle-key' });
  dataDir = mkdtempSync(join(tmpdir(), 'idle-agents-'));
  const driver = createLocalDriver({ dataDir, runtime: 'builtin', sandbox: testAgentSandbox(), stopGraceMs: 500 });
  const resume = driver.resume.bind(driver);
  driver.resume = (id) => {
    resumes.push(id);
    return resume(id);
  };
  t = await startAgentsPlatform({
    driver,
    env: {
      HOSTING_DRIVER: 'local',
      DATA_DIR: dataDir,
      AGENT_RUNTIME: 'builtin',
      AGENT_SANDBOX: testAgentSandbox(),
      ROUTER_BASE_URL: upstream.baseUrl,
      ROUTER_API_KEY: 'router-idle-key',
      AGENT_IDLE_SUSPEND_S: '1',
      HEARTBEAT_POLL_MS: '50',
    },
  });
  await t.web.listen({ host: '127.0.0.1', port: 0 });
  webUrl = `http://127.0.0.1:${(t.web.server.address() as AddressInfo).port}`;
  const user = await subscriber(t, 'network');
  cookie = user.cookie;
  userId = user.id;
  key = (await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie }, payload: { name: 'idle' } })).json().key;
  const prov = await t.web.inject({ method: 'POST', url: '/api/agents/provision', headers: { cookie }, payload: { name: 'Sleepy' } });
  expect(prov.statusCode, prov.body).toBe(201);
  agentId = prov.json().agent.id;
}, 90_000);

afterAll(async () => {
  await t?.close();
  await t?.driver.shutdown();
  await upstream?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('idle agents sleep (AGENT_IDLE_SUSPEND_S)', () => {
  it('a second without traffic: suspended, no process left (bwrap included), its folder and state on disk', async () => {
    await waitFor('running', 60_000);
    const processes = tree(statePid());
    expect(processes.length).toBeGreaterThan(0);
    expect(processes.every(alive)).toBe(true);
    const gone = await asleep();
    expect(gone).toEqual(processes);
    expect(processes.some(alive)).toBe(false);
    expect(await t.driver.status(agentId)).toMatchObject({ status: 'suspended' });
    expect(existsSync(join(dataDir, 'agents', agentId, 'workspace'))).toBe(true);
    // the backend's view and the runtime-instances list read it too
    const backend = await t.backend.inject({
      method: 'GET',
      url: `/api/agents/${agentId}`,
      headers: { ...bearer(t), 'x-user-id': userId },
    });
    expect(backend.json().status).toBe('suspended');
  }, 90_000);

  it('the dashboard chat wakes it and is answered (not 503); it reads running with a new process', async () => {
    await asleep();
    const started = Date.now();
    const res = await chat('wake up');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().reply).toBe('Echo: wake up');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(['running', 'suspended']).toContain(await status()); // it may already sleep again a second later
    expect(resumes.filter((id) => id === agentId).length).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('the agent proxy over HTTP wakes it (a key, /api/agents/:id/v1/chat/completions)', async () => {
    await asleep();
    const res = await t.web.inject({
      method: 'POST',
      url: `/api/agents/${agentId}/v1/chat/completions`,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      payload: { messages: [{ role: 'user', content: 'through the proxy' }] },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().choices[0].message.content).toBe('Echo: through the proxy');
  }, 60_000);

  it('the agent proxy over WebSocket wakes it: the socket opens once the agent answers, and the chat is replied', async () => {
    await asleep();
    const socket = new WebSocket(`${webUrl.replace(/^http/, 'ws')}/api/agents/${agentId}/ws`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const reply = await new Promise<{ type: string; content?: string }>((resolve, reject) => {
      socket.on('open', () => socket.send(JSON.stringify({ type: 'chat', content: 'over the socket', sessionKey: 'idle' })));
      socket.on('message', (raw) => {
        const frame = JSON.parse(raw.toString());
        if (frame.type === 'reply' || frame.type === 'error') resolve(frame);
      });
      socket.on('unexpected-response', (_req, r) => reject(new Error(`HTTP ${r.statusCode}`)));
      socket.on('error', reject);
      socket.on('close', (code, why) => reject(new Error(`closed ${code} ${why}`)));
    });
    expect(reply).toEqual({ type: 'reply', content: 'Echo: over the socket' });
    // an open socket keeps it awake: well past the idle second, it still runs, and its traffic is written as it goes
    const before = await lastActive();
    await new Promise((r) => setTimeout(r, 2_500));
    expect(await status()).toBe('running');
    expect((await lastActive()) - before).toBeGreaterThan(1_500);
    socket.close();
    await asleep();
  }, 60_000);

  it('a heartbeat that falls due wakes it and runs', async () => {
    await asleep();
    const saved = await t.web.inject({
      method: 'POST',
      url: '/api/heartbeat',
      headers: { cookie },
      payload: { agentId, frequency: '1m', enabled: true },
    });
    expect(saved.statusCode, saved.body).toBe(200);
    await sql`update heartbeat_settings set next_heartbeat = now() - interval '1 second' where agent_id = ${agentId}`.execute(
      t.database.db.kysely,
    );
    const row = await eventually(
      async () => {
        const r = await t.database.db.kysely
          .selectFrom('heartbeat_settings')
          .selectAll()
          .where('agent_id', '=', agentId)
          .executeTakeFirstOrThrow();
        return r.runs >= 1 && r.locked_by === null ? r : null;
      },
      20_000,
      50,
    );
    expect(row.last_run_status).toBe('ok');
    await t.web.inject({
      method: 'POST',
      url: '/api/heartbeat',
      headers: { cookie },
      payload: { agentId, frequency: '1m', enabled: false },
    });
  }, 60_000);

  it('ten callers at once share one wake: one resume, one process, ten answers', async () => {
    await asleep();
    const before = resumes.length;
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => chat(`caller ${i}`)));
    expect(answers.map((a) => `${a.statusCode} ${a.statusCode === 200 ? '' : a.body}`)).toEqual(Array(10).fill('200 '));
    expect(answers.map((a) => a.json().reply).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `Echo: caller ${i}`).sort());
    expect(resumes.length - before).toBe(1);
    // one runtime: the state's process tree is the only one naming the agent
    const pid = statePid();
    expect(alive(pid)).toBe(true);
    const runtimes = readdirSync('/proc').filter((n) => {
      if (!/^\d+$/.test(n)) return false;
      try {
        return readFileSync(`/proc/${n}/environ`, 'utf8').split('\0').includes(`AGENT_ID=${agentId}`);
      } catch {
        return false;
      }
    });
    expect(runtimes.length).toBeLessThanOrEqual(1);
  }, 60_000);

  it('a sleeping agent whose unit is gone (a platform restart, its state removed) is deployed again by the wake, and answers', async () => {
    await asleep();
    rmSync(join(dataDir, 'agents', agentId, 'driver-state.json'));
    const res = await chat('after the restart');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().reply).toBe('Echo: after the restart');
    expect(alive(statePid())).toBe(true);
  }, 60_000);

  it('the watchdog never took the sleeping agent for a broken one: no crash, no repair', async () => {
    const view = (
      await t.backend.inject({
        method: 'GET',
        url: `/api/agents/${agentId}/watchdog?limit=100`,
        headers: { ...bearer(t), 'x-user-id': userId },
      })
    ).json() as { history: { kind: string; to: string | null }[] };
    expect(view.history.filter((h) => h.kind === 'crash' || h.kind === 'repair')).toEqual([]);
    expect(view.history.filter((h) => h.to === 'degraded' || h.to === 'crash_loop')).toEqual([]);
  });

  it('Stop of a sleeping agent stops it (no wake); Start runs it again', async () => {
    await asleep();
    const before = resumes.length;
    const headers = { ...bearer(t), 'x-user-id': userId };
    const stop = await t.backend.inject({ method: 'POST', url: `/api/agents/${agentId}/stop`, headers });
    expect(stop.statusCode, stop.body).toBe(200);
    expect(stop.json().status).toBe('stopped');
    expect(await status()).toBe('stopped');
    expect(resumes.length).toBe(before);
    const start = await t.backend.inject({ method: 'POST', url: `/api/agents/${agentId}/start`, headers });
    expect(start.statusCode, start.body).toBe(200);
    await waitFor('running', 60_000);
    expect(alive(statePid())).toBe(true);
    // and, idle again, it goes back to sleep
    await asleep();
  }, 90_000);
});
