/**
 * The agent's status is what its process is doing (docs/agents.md "Stop, suspend and restart",
 * docs/watchdog.md "Checks on demand"), proved through the HTTP API on the live platform: real
 * sockets, the real local driver with the built-in runtime (sandboxed where this machine can), and
 * the watchdog at its §8 check interval of 120 s, so nothing below can be the periodic probe.
 * - a SIGKILLed agent reads not running within 10 s (the platform saw its process end), is
 *   repaired, and answers again;
 * - a failed call to an agent has the watchdog check it at once, at most once per 10 s per agent;
 * - Stop leaves no process of the agent: none of its uid, none in its cgroup, none naming it;
 * - twenty concurrent start, stop, restart and deploy calls through both apps answer without a 5xx
 *   and leave the agent with exactly one process when it reads running, none when it reads stopped.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECK_SOON_GAP_MS } from '../../src/domains/watchdog/watchdog.service.ts';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';
import { eventually } from './helpers.ts';

let live: LivePlatform;
let cookie = '';
let userId = '';

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${live.webUrl}${path}`, {
    method,
    headers: { cookie, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const m = /service-session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '');
  if (m) cookie = `service-session=${m[1]}`;
  return { status: res.status, body: (await res.json().catch(() => ({}))) as Record<string, any> };
}

async function backend(method: string, path: string, body?: unknown) {
  const res = await fetch(`http://127.0.0.1:${live.config.BACKEND_PORT}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${live.config.INTERNAL_API_KEY}`,
      'x-user-id': userId,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: await res.text() };
}

type DriverState = { pid: number; uid?: number; url: string };
const driverState = (agentId: string) =>
  JSON.parse(readFileSync(join(live.config.DATA_DIR, 'agents', agentId, 'driver-state.json'), 'utf8')) as DriverState;

/**
 * Every live process of the agent, counted as an operator would from /proc: its own uid's
 * (sandboxed as root), those in its cgroup, and those whose environment names it; not the sandbox
 * wrapper (bwrap) nor a zombie.
 */
function agentProcesses(agentId: string, uid: number | undefined): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, 'utf8');
      const state = /^State:\s+(\S)/m.exec(status)?.[1];
      const comm = readFileSync(`/proc/${name}/comm`, 'utf8').trim();
      if (state === 'Z' || comm === 'bwrap') continue;
      const ofUid = uid !== undefined && /^Uid:\s+(\d+)/m.exec(status)?.[1] === String(uid);
      const inCgroup = readFileSync(`/proc/${name}/cgroup`, 'utf8').includes(`/agent-platform/${agentId}\n`);
      let named = false;
      try {
        named = readFileSync(`/proc/${name}/environ`, 'utf8').split('\0').includes(`AGENT_ID=${agentId}`);
      } catch {
        /* not ours to read */
      }
      if (ofUid || inCgroup || named) found.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return found;
}

const agentView = async (agentId: string) =>
  (await api('GET', `/api/agents/${agentId}`)).body.agent as { status: string; watchdog?: { state: string } | null };

/** Running, watched (the watchdog's first probe passed) and answering its gateway. */
async function runningAndWatched(agentId: string) {
  await eventually(
    async () => {
      const a = await agentView(agentId);
      if (a.status === 'error') throw new Error('the agent failed to start');
      if (a.status !== 'running' || a.watchdog?.state !== 'running') return null;
      return fetch(`${driverState(agentId).url}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
    },
    90_000,
    100,
  );
}

async function provision(name: string) {
  const r = await api('POST', '/api/agents/provision', { name });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const id = r.body.agent.id as string;
  await runningAndWatched(id);
  return id;
}

beforeAll(async () => {
  live = await startLivePlatform({
    ADMIN_EMAILS: 'owner@example.com',
    ADMIN_EMAILS_REQUIRE_VERIFIED: 'false',
    // the §8 check interval: a reaction within seconds cannot be the periodic probe
    WATCHDOG_CHECK_INTERVAL: '120',
    WATCHDOG_DEGRADED_CHECK_INTERVAL: '1',
    WATCHDOG_REPAIR_STOP_WAIT_MS: '200',
    WATCHDOG_POLL_MS: '200',
  });
  expect((await api('POST', '/api/register', { email: 'owner@example.com', password: 'correct horse battery' })).status).toBe(201);
  expect((await api('POST', '/api/auth/login', { email: 'owner@example.com', password: 'correct horse battery' })).status).toBe(200);
  userId = (await api('GET', '/api/auth/session')).body.user.id;
}, 120_000);

afterAll(async () => {
  await live?.close();
});

describe('status is what the process is doing', () => {
  it('a SIGKILLed agent reads not running within 10 s, is repaired, and answers again', async () => {
    const id = await provision('Killed');
    const { pid } = driverState(id);
    const killedAt = Date.now();
    process.kill(pid, 'SIGKILL');
    const seen = await eventually(
      async () => {
        const a = await agentView(id);
        return a.watchdog && a.watchdog.state !== 'running' ? a.watchdog.state : null;
      },
      10_000,
      100,
    );
    expect(Date.now() - killedAt).toBeLessThan(10_000);
    expect(['degraded', 'repairing']).toContain(seen);

    // the repair follows, as after a probe: a new process, watched and answering
    await eventually(
      async () => {
        const v = (await api('GET', `/api/agents/${id}/watchdog?limit=50`)).body as {
          state: string;
          history: { kind: string; ok: boolean | null }[];
        };
        return v.state === 'running' && v.history.some((h) => h.kind === 'repair' && h.ok) ? v : null;
      },
      30_000,
      200,
    );
    expect(driverState(id).pid).not.toBe(pid);
    const history = (await api('GET', `/api/agents/${id}/watchdog?limit=50`)).body.history as { kind: string; detail: string | null }[];
    expect(history.filter((h) => h.kind === 'crash').map((h) => h.detail)).toEqual(['the gateway process exited unexpectedly']);
    const chat = await api('POST', `/api/agents/${id}/v1/chat/completions`, { messages: [{ role: 'user', content: 'back?' }] });
    expect(chat.status).toBe(200);
    expect((await api('DELETE', `/api/agents/${id}`)).status).toBe(200);
  }, 90_000);

  it('a call that cannot reach the agent has it checked at once (once per 10 s per agent), not at the next probe', async () => {
    const id = await provision('Unreachable');
    const lastCheck = async () => (await api('GET', `/api/agents/${id}/watchdog?limit=1`)).body.lastCheckAt as string;
    const before = await lastCheck();
    // the platform's record points at an address where nothing listens (as after a move it missed)
    const db = live.database.db.kysely;
    const { gateway_url: real } = await db.selectFrom('agents').select('gateway_url').where('id', '=', id).executeTakeFirstOrThrow();
    await db.updateTable('agents').set({ gateway_url: 'http://127.0.0.1:9' }).where('id', '=', id).execute();
    await new Promise((r) => setTimeout(r, 2_100)); // the agent client's address cache (2 s)
    const failed = await api('POST', `/api/agents/${id}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hello?' }] });
    expect(failed.status).toBe(502);
    expect(failed.body.code).toBe('AGENT_UNAVAILABLE');
    expect(failed.body.error).toMatch(/checking it now/);
    // the check ran within seconds: it found the process healthy where the driver says it is, and wrote that address back
    await eventually(async () => (await lastCheck()) !== before, 5_000, 100);
    await eventually(
      async () => (await db.selectFrom('agents').select('gateway_url').where('id', '=', id).executeTakeFirstOrThrow()).gateway_url === real,
      5_000,
      100,
    );
    expect((await agentView(id)).watchdog?.state).toBe('running');
    // more failures within the gap ask for no further check
    const watchdog = live.running()!.platform.services.watchdog;
    expect(await watchdog.checkSoon(id, 'unreachable')).toBe(false);
    expect(CHECK_SOON_GAP_MS).toBe(10_000);
    expect((await api('DELETE', `/api/agents/${id}`)).status).toBe(200);
  }, 90_000);

  it('Stop leaves no process of the agent: none of its uid, none in its cgroup, none naming it', async () => {
    const id = await provision('Stopped');
    const { pid, uid } = driverState(id);
    expect(agentProcesses(id, uid)).toContain(pid);
    const stop = await api('POST', `/api/instance/${userId}/stop`, { agentId: id });
    expect(stop.status).toBe(200);
    expect(stop.body.agents).toEqual([{ id, status: 'stopped' }]);
    // the answer comes once the processes are gone
    expect(agentProcesses(id, uid)).toEqual([]);
    expect((await agentView(id)).status).toBe('stopped');
    const health = await backend('GET', `/api/agents/${id}/health`);
    expect(JSON.parse(health.body).status).toBe('stopped');
    await eventually(async () => (await agentView(id)).watchdog?.state === 'stopped', 10_000, 100);
    // a Stop is not a crash: nothing exited unexpectedly
    const history = (await api('GET', `/api/agents/${id}/watchdog?limit=50`)).body.history as { kind: string }[];
    expect(history.filter((h) => h.kind === 'crash')).toEqual([]);
    expect((await api('DELETE', `/api/agents/${id}`)).status).toBe(200);
  }, 90_000);
});

describe('lifecycle calls never collide (the real local driver)', () => {
  it('20 concurrent start, stop, restart and deploy calls through both apps: no 5xx, and one process when it reads running', async () => {
    const id = await provision('Contested');
    const uid = driverState(id).uid;
    const calls: (() => Promise<{ what: string; status: number; body: string }>)[] = [];
    for (let i = 0; i < 20; i++) {
      const action = (['start', 'stop', 'restart'] as const)[i % 3]!;
      if (i % 5 === 4)
        calls.push(async () => ({
          what: 'POST /api/deployments',
          ...(await backend('POST', '/api/deployments', { userId, agentId: id, name: 'Contested', plan: 'network' })),
        }));
      else if (i % 2 === 0)
        calls.push(async () => {
          const r = await api('POST', `/api/instance/${userId}/${action}`, { agentId: id });
          return { what: `web ${action}`, status: r.status, body: JSON.stringify(r.body) };
        });
      else calls.push(async () => ({ what: `backend ${action}`, ...(await backend('POST', `/api/agents/${id}/${action}`)) }));
    }
    const results = await Promise.all(calls.map((c) => c()));
    expect(results.filter((r) => r.status >= 500)).toEqual([]);
    expect(results.filter((r) => r.status >= 300)).toEqual([]);

    // once the deployments the calls queued have run, the record says what runs
    const db = live.database.db.kysely;
    const settled = await eventually(
      async () => {
        const active = await db
          .selectFrom('deployments')
          .select('id')
          .where('agent_id', '=', id)
          .where('status', 'in', ['queued', 'running'])
          .execute();
        const s = (await agentView(id)).status;
        return active.length === 0 && s !== 'provisioning' ? s : null;
      },
      90_000,
      200,
    );
    if (settled === 'running') {
      expect(agentProcesses(id, uid)).toEqual([driverState(id).pid]);
    } else {
      expect(settled).toBe('stopped');
      expect(agentProcesses(id, uid)).toEqual([]);
    }
    // and a Start after it all runs exactly one
    expect((await api('POST', `/api/instance/${userId}/start`, { agentId: id })).status).toBe(200);
    await runningAndWatched(id);
    expect(agentProcesses(id, uid)).toEqual([driverState(id).pid]);
  }, 180_000);
});
