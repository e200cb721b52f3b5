/**
 * The idle sweep and the waker (docs/agents.md "Idle agents sleep") against PostgreSQL and the
 * in-memory hosting driver, driven by hand (the platform's workers are not started):
 * - the claim takes running agents idle past the setting (since their traffic, or their start), not
 *   those with traffic counted in memory nor those just started, and two sweeps at once never take
 *   the same agent;
 * - a suspend goes to the driver, unless traffic came since the claim; a driver that fails puts the
 *   agent back to `running`;
 * - twenty wakes at once are one resume; a wake after a Stop resumes nothing;
 * - the watchdog's probe that finds a sleeping agent's unit suspended changes nothing, while a unit
 *   suspended behind the platform's back (its record running) is still a failure.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAgentTraffic } from '../../src/domains/agents/idle/agent-traffic.service.ts';
import { createIdleAgents } from '../../src/domains/agents/idle/idle-agents.service.ts';
import { createLifecycleLocks } from '../../src/domains/agents/lifecycle-locks.service.ts';
import { type AgentsTestPlatform, startAgentsPlatform, subscriber } from './helpers.ts';

let t: AgentsTestPlatform;
let userId: string;
let n = 0;

const db = () => t.database.db;
const statusOf = async (id: string) =>
  (await db().kysely.selectFrom('agents').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status;

/** A running agent (a record and a unit of the fake driver) started `agoS` seconds ago. */
async function runningAgent(agoS: number): Promise<string> {
  const id = `idle-sweep-${n++}-${Date.now().toString(36)}`;
  await db()
    .kysely.insertInto('agents')
    .values({
      id,
      user_id: userId,
      name: id,
      status: 'running',
      subdomain: id,
      url: `https://${id}.invalid`,
      gateway_url: `http://127.0.0.1:1/${id}`,
      started_at: sql<Date>`now() - make_interval(secs => ${agoS})`,
      updated_at: sql<Date>`now() - make_interval(secs => ${agoS})`,
    })
    .execute();
  await t.driver.deploy({
    agentId: id,
    userId,
    plan: 'solo',
    gatewayToken: 'g'.repeat(48),
    platformApiKey: 'apk_x',
    backendUrl: 'http://127.0.0.1:1',
    config: {},
  });
  return id;
}

function idleAgents(idleS = 5) {
  const traffic = createAgentTraffic({ db: db(), flushMs: 60_000 });
  return { traffic, idle: createIdleAgents({ db: db(), driver: t.driver, locks: createLifecycleLocks(), idleS, traffic }) };
}

beforeAll(async () => {
  t = await startAgentsPlatform({ startWorkers: false });
  userId = (await subscriber(t, 'network')).id;
});

afterAll(async () => {
  await t?.close();
});

beforeEach(async () => {
  // agents of earlier cases are not idle candidates any more
  await db().kysely.updateTable('agents').set({ status: 'stopped' }).where('status', '=', 'running').execute();
  t.driver.calls.length = 0;
});

describe('the idle sweep', () => {
  it('claims agents idle past the setting, not those with traffic in memory nor those just started', async () => {
    const idle = await runningAgent(30);
    const fresh = await runningAgent(1);
    const talked = await runningAgent(30);
    const { traffic, idle: sweep } = idleAgents();
    traffic.touch(talked);
    const claimed = await sweep.claim(100);
    expect(claimed.map((a) => a.id)).toEqual([idle]);
    expect(await statusOf(idle)).toBe('suspended');
    expect(await statusOf(fresh)).toBe('running');
    expect(await statusOf(talked)).toBe('running');
    // the traffic was written by the claim's flush
    const row = await db().kysely.selectFrom('agents').select('last_active_at').where('id', '=', talked).executeTakeFirstOrThrow();
    expect(Date.now() - row.last_active_at!.getTime()).toBeLessThan(5_000);
  });

  it('two sweeps at once never claim the same agent', async () => {
    const ids = await Promise.all(Array.from({ length: 12 }, () => runningAgent(30)));
    const [a, b] = [idleAgents().idle, idleAgents().idle];
    const [x, y] = await Promise.all([a.claim(6), b.claim(100)]);
    const xs = x.map((r) => r.id);
    const ys = y.map((r) => r.id);
    expect(xs.filter((id) => ys.includes(id))).toEqual([]);
    expect([...xs, ...ys].sort()).toEqual([...ids].sort());
  });

  it('suspends through the driver; traffic since the claim keeps it running; a driver failure puts it back', async () => {
    const quiet = await runningAgent(30);
    const spoken = await runningAgent(30);
    const failing = await runningAgent(30);
    const { traffic, idle } = idleAgents();
    const claimed = await idle.claim(100);
    expect(claimed).toHaveLength(3);
    traffic.touch(spoken);
    for (const a of claimed.filter((c) => c.id !== failing)) await idle.suspend(a);
    expect(t.driver.units.get(quiet)!.status).toBe('suspended');
    expect(await statusOf(quiet)).toBe('suspended');
    expect(t.driver.calls.filter((c) => c.op === 'suspend').map((c) => c.agentId)).toEqual([quiet]);
    expect(await statusOf(spoken)).toBe('running');
    // what the sweep's job does with a run that threw
    t.driver.unreachable = true;
    await expect(idle.suspend(claimed.find((c) => c.id === failing)!)).rejects.toThrow();
    t.driver.unreachable = false;
    await idle.failed(claimed.find((c) => c.id === failing)!);
    expect(await statusOf(failing)).toBe('running');
  });
});

describe('the waker', () => {
  it('twenty wakes at once are one resume, and all of them get the agent running', async () => {
    const id = await runningAgent(30);
    const { idle } = idleAgents();
    const [agent] = await idle.claim(100);
    await idle.suspend(agent!);
    const woken = await Promise.all(Array.from({ length: 20 }, () => idle.wake(agent!)));
    expect(woken.map((a) => a.status)).toEqual(Array(20).fill('running'));
    expect(t.driver.calls.filter((c) => c.op === 'resume' && c.agentId === id)).toHaveLength(1);
    expect(t.driver.units.get(id)!.status).toBe('healthy');
    expect(await statusOf(id)).toBe('running');
  });

  it('a wake after a Stop resumes nothing: the record says stopped', async () => {
    const id = await runningAgent(30);
    const { idle } = idleAgents();
    const [agent] = await idle.claim(100);
    await idle.suspend(agent!);
    await db().kysely.updateTable('agents').set({ status: 'stopped' }).where('id', '=', id).execute();
    const after = await idle.wake(agent!);
    expect(after.status).toBe('stopped');
    expect(t.driver.calls.filter((c) => c.op === 'resume')).toHaveLength(0);
  });
});

describe('the watchdog and a sleeping agent', () => {
  /** A check by the holder of the agent's watch, its unit found `unit` and its record `record`. */
  async function checkWith(record: 'running' | 'suspended') {
    const id = await runningAgent(30);
    await db()
      .kysely.insertInto('agent_watchdog')
      .values({
        agent_id: id,
        user_id: userId,
        state: 'running',
        locked_by: 'idle-test',
        lease_until: sql<Date>`now() + interval '1 minute'`,
      })
      .execute();
    t.driver.units.get(id)!.status = 'suspended';
    await db().kysely.updateTable('agents').set({ status: record }).where('id', '=', id).execute();
    const state = await t.platform.services.watchdog.check('idle-test', {
      agent_id: id,
      user_id: userId,
      state: 'running',
      failures: 0,
      repair_attempts: 0,
      gateway_url: `http://127.0.0.1:1/${id}`,
    });
    const events = await db().kysely.selectFrom('agent_watchdog_events').select(['kind', 'to_state']).where('agent_id', '=', id).execute();
    return { state, events };
  }

  it('a probe that finds the unit suspended while the record says suspended (the sweep put it to sleep) changes nothing', async () => {
    expect(await checkWith('suspended')).toEqual({ state: 'running', events: [] });
  });

  it('a unit suspended while the record says running (suspended outside the platform) is still a failure', async () => {
    const { state, events } = await checkWith('running');
    expect(state).toBe('degraded');
    expect(events).toContainEqual({ kind: 'transition', to_state: 'degraded' });
  });
});
