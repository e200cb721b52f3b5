/**
 * §4.12 heartbeats fire: with real agent processes (local driver, built-in runtime) an enabled
 * heartbeat wakes the agent, which runs its heartbeat prompt (and HEARTBEAT.md) through its
 * model; lastHeartbeat/nextHeartbeat follow the real runs; disabling stops them; a holder that
 * dies before or after the agent ran neither loses nor doubles the heartbeat; two workers never
 * run one heartbeat twice. "Time passing" is moving next_heartbeat into the past in SQL.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentClient } from '../../src/domains/agents/agent-client/agent.client.ts';
import { createAgentTargets } from '../../src/domains/agents/agent-client/targets.service.ts';
import { createHeartbeatService } from '../../src/domains/heartbeat/heartbeat.service.ts';
import { DEFAULT_HEARTBEAT_PROMPT } from '../../src/runtime/gateway.ts';
import { createHeartbeatWorker, heartbeatJob } from '../../src/workers/heartbeats.ts';
import { eventually } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { signUp, TEST_SECRETS } from '../helpers/platform.ts';
import { deployAgent, type RunningPlatform, sleep, startPlatform } from '../watchdog/helpers.ts';

let database: TestDatabase;
let dataDir: string;
let upstream: FakeOpenAi;
let p: RunningPlatform;
let agentId: string;
let cookie: string;

const heartbeatRequests = () => upstream.requests.filter((r) => r.body.messages?.at(-1)?.content === DEFAULT_HEARTBEAT_PROMPT);
const row = () => database.db.kysely.selectFrom('heartbeat_settings').selectAll().where('agent_id', '=', agentId).executeTakeFirstOrThrow();
/** the minute passed: the heartbeat is due now */
const makeDue = () =>
  sql`update heartbeat_settings set next_heartbeat = now() - interval '1 second' where agent_id = ${agentId}`.execute(database.db.kysely);
const settings = async () =>
  (await p.web.inject({ method: 'GET', url: `/api/heartbeat?agentId=${agentId}`, headers: { cookie } })).json().heartbeat;
const save = (payload: object) =>
  p.web.inject({ method: 'POST', url: '/api/heartbeat', headers: { cookie }, payload: { agentId, ...payload } });
/** what a backend's heartbeat worker is built from; a lease of 300 ms, so a dead holder's heartbeats come back quickly */
const workerOptions = () => ({
  heartbeat: createHeartbeatService({ db: database.db }),
  agentClient: createAgentClient({ targets: createAgentTargets({ db: database.db, secretsKey: TEST_SECRETS.secretsEncryptionKey }) }),
  pollMs: 50,
  timeoutMs: 10_000,
  leaseMs: 300,
});
const worker = () => createHeartbeatWorker(workerOptions());
/** a holder that claims due heartbeats and then dies (its claim and its run, driven by hand; nothing recorded) */
const dyingHolder = () => {
  const job = heartbeatJob(workerOptions());
  return {
    claim: () => job.claim({ holder: 'dying-holder', leaseMs: 300, limit: 20 }),
    run: (h: Parameters<typeof job.run>[0]) => job.run(h, new AbortController().signal),
  };
};

beforeAll(async () => {
  database = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'heartbeat-fire-'));
  upstream = await startFakeOpenAi({ apiKey: 'router-key', reply: 'HEARTBEAT_OK' });
  p = await startPlatform({
    db: database.db,
    dataDir,
    env: { ROUTER_BASE_URL: upstream.baseUrl, ROUTER_API_KEY: 'router-key', HEARTBEAT_POLL_MS: '50' },
  });
  const owner = await signUp(p.web);
  agentId = (await deployAgent(p, database.db, owner)).agentId;
  cookie = owner.cookie;
}, 60_000);

afterAll(async () => {
  await p?.close();
  await p?.driver.shutdown();
  await upstream?.close();
  await database?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('§4.12 heartbeats fire', () => {
  it('an enabled heartbeat wakes the agent at its frequency; the runtime runs its prompt through its model', async () => {
    expect((await save({ frequency: '1m', enabled: true })).statusCode).toBe(200);
    await sleep(300);
    expect(heartbeatRequests()).toHaveLength(0); // not due yet: next is a minute away
    await makeDue();
    const r = await eventually(async () => {
      const x = await row();
      return x.runs === 1 && x.locked_by === null ? x : null;
    }, 15_000);
    expect(r.last_run_status).toBe('ok');
    expect(heartbeatRequests()).toHaveLength(1);
    // through the AI gateway: `vendor/model` is no catalog model, so the owner's plan's pick serves
    expect(heartbeatRequests()[0]!.body.model).toBe('openai/gpt-4o-mini');
    // lastHeartbeat is the run, nextHeartbeat a minute after the scheduled time
    const s = await settings();
    expect(Math.abs(Date.parse(s.lastHeartbeat) - new Date(r.last_heartbeat!).getTime())).toBeLessThan(5);
    const gap = Date.parse(s.nextHeartbeat) - Date.parse(s.lastHeartbeat);
    expect(gap).toBeGreaterThan(55_000);
    expect(gap).toBeLessThanOrEqual(60_000);

    // the next minute: it runs again, with HEARTBEAT.md as context
    writeFileSync(join(dataDir, 'agents', agentId, 'workspace', 'HEARTBEAT.md'), '- check the inbox\n');
    await makeDue();
    await eventually(async () => (await row()).runs === 2, 15_000);
    const second = heartbeatRequests()[1]!;
    expect(second.body.messages![0]).toEqual({ role: 'system', content: 'HEARTBEAT.md:\n- check the inbox\n' });
  }, 60_000);

  it('disabling stops them', async () => {
    expect((await save({ frequency: '1m', enabled: false })).statusCode).toBe(200);
    const before = heartbeatRequests().length;
    const runs = (await row()).runs;
    await makeDue();
    await sleep(500);
    expect(heartbeatRequests()).toHaveLength(before);
    expect((await row()).runs).toBe(runs);
  }, 30_000);

  it('the runtime endpoint needs the gateway token', async () => {
    const a = await database.db.kysely.selectFrom('agents').select('gateway_url').where('id', '=', agentId).executeTakeFirstOrThrow();
    const res = await fetch(`${a.gateway_url}/v1/heartbeat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(401);
  });

  describe('restarts and several workers (the platform worker stopped; workers driven by hand)', () => {
    beforeAll(async () => {
      await p.platform.heartbeatWorker!.stop();
      expect((await save({ frequency: '1m', enabled: true })).statusCode).toBe(200);
    });

    it('a holder that dies after the agent ran: the next holder takes it after the lease, the agent does not run it twice', async () => {
      const before = heartbeatRequests().length;
      const runs = (await row()).runs;
      await makeDue();
      const dead = dyingHolder();
      const [h] = await dead.claim();
      expect(h?.agent_id).toBe(agentId);
      expect((await dead.run(h!)).status).toBe('ok'); // ran, then the process died before recording
      expect(heartbeatRequests()).toHaveLength(before + 1);

      const next = worker();
      expect(await next.runOnce()).toBe(0); // still leased by the dead holder
      await sleep(350);
      expect(await next.runOnce()).toBe(1);
      const r = await row();
      expect(r.runs).toBe(runs + 1);
      expect(r.last_run_status).toBe('ok');
      expect(heartbeatRequests()).toHaveLength(before + 1); // the runtime answered the repeated run id from memory
    }, 30_000);

    it('a holder that dies before the agent ran: the heartbeat is not lost', async () => {
      const before = heartbeatRequests().length;
      await makeDue();
      expect(await dyingHolder().claim()).toHaveLength(1);
      await sleep(350);
      expect(await worker().runOnce()).toBe(1);
      expect(heartbeatRequests()).toHaveLength(before + 1);
    }, 30_000);

    it('two workers polling at once run a due heartbeat once', async () => {
      const before = heartbeatRequests().length;
      await makeDue();
      const counts = await Promise.all([worker().runOnce(), worker().runOnce(), worker().runOnce()]);
      expect(counts.reduce((a, b) => a + b, 0)).toBe(1);
      expect(heartbeatRequests()).toHaveLength(before + 1);
    }, 30_000);
  });
});
