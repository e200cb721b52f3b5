/**
 * Several backend processes (§3 watchdog; docs/architecture.md "Processes"): two platforms over one database
 * and one DATA_DIR. Each agent is watched by exactly one of them (a lease on its watchdog row);
 * when the holder dies (its loop stops without giving the lease back) the other takes the agent
 * over within one lease period, and then really watches it: a SIGKILLed agent is repaired by the
 * new holder, whose driver never started it (it deploys it again).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { chat, deployAgent, FAST, pidOf, type RunningPlatform, sleep, startPlatform, waitForState, watchdogView } from './helpers.ts';

let database: TestDatabase;
let dataDir: string;
let upstream: FakeOpenAi;
let a: RunningPlatform;
let b: RunningPlatform;

const holderOf = async (agentId: string) =>
  (await database.db.kysely.selectFrom('agent_watchdog').select(['locked_by']).where('agent_id', '=', agentId).executeTakeFirstOrThrow())
    .locked_by;

beforeAll(async () => {
  database = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'watchdog-takeover-'));
  upstream = await startFakeOpenAi({ apiKey: 'router-key' });
  const env = { ROUTER_BASE_URL: upstream.baseUrl, ROUTER_API_KEY: 'router-key' };
  a = await startPlatform({ db: database.db, dataDir, env });
  b = await startPlatform({ db: database.db, dataDir, env, startWorkers: false });
}, 60_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await a?.driver.shutdown();
  await b?.driver.shutdown();
  await upstream?.close();
  await database?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('watchdog lease across two backends', () => {
  it('one holder per agent; the other takes over within one lease period when the holder dies', async () => {
    const { agentId, owner, token } = await deployAgent(a, database.db);
    await waitForState(a, agentId, owner.id, 'running');
    const holderA = a.platform.watchdogWorker!.holderId;
    expect(await holderOf(agentId)).toBe(holderA);

    // a second backend starts: it must not take a live holder's agent
    await b.platform.startWorkers();
    const holderB = b.platform.watchdogWorker!.holderId;
    await sleep(FAST.leaseMs! * 2);
    expect(await holderOf(agentId)).toBe(holderA);

    // the holder dies: its loop and lease renewal stop, the lease is not given back
    await a.platform.watchdogWorker!.stop({ release: false });
    const died = Date.now();
    await eventually(async () => (await holderOf(agentId)) === holderB, FAST.leaseMs! * 3, 20);
    expect(Date.now() - died).toBeLessThanOrEqual(FAST.leaseMs! + FAST.pollMs! + 500);

    // the new holder watches it: a crash is repaired by B (its driver never started the process)
    process.kill(pidOf(dataDir, agentId), 'SIGKILL');
    await eventually(
      async () => {
        const v = await watchdogView(b, agentId, owner.id);
        return v.state === 'running' && v.history.some((h) => h.kind === 'repair' && h.ok);
      },
      60_000,
      50,
    );
    const rows = await database.db.kysely
      .selectFrom('agent_watchdog_events')
      .select(['kind', 'holder'])
      .where('agent_id', '=', agentId)
      .where('kind', '=', 'repair')
      .execute();
    expect(rows.map((r) => r.holder)).toEqual([holderB]);
    expect((await chat(database.db, agentId, token, 'still there?')).status).toBe(200);
  }, 120_000);

  it('a graceful stop gives the agents back at once', async () => {
    const { agentId, owner } = await deployAgent(b, database.db);
    await waitForState(b, agentId, owner.id, 'running');
    expect(await holderOf(agentId)).toBe(b.platform.watchdogWorker!.holderId);
    await b.platform.watchdogWorker!.stop();
    expect(await holderOf(agentId)).toBeNull();
  }, 60_000);
});
