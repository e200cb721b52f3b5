/**
 * The watchdog through the API with the in-memory fake hosting driver (settings from the
 * WATCHDOG_* environment): GET /api/agents/:id/watchdog on both apps (auth, ownership, bad
 * input), the state in the agents' own responses, a repair through a driver without `stop`, and
 * a notification that the bot API first refuses is retried and delivered once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram.ts';
import { signUp } from '../helpers/platform.ts';
import { BOT_TOKEN, CHAT_ID } from './helpers.ts';

let t: AgentsTestPlatform;
let telegram: FakeTelegram;

beforeAll(async () => {
  telegram = await startFakeTelegram({ token: BOT_TOKEN });
  t = await startAgentsPlatform({
    env: {
      WATCHDOG_CHECK_INTERVAL: '1',
      WATCHDOG_DEGRADED_CHECK_INTERVAL: '1',
      WATCHDOG_POLL_MS: '50',
      WATCHDOG_REPAIR_STOP_WAIT_MS: '0',
      WATCHDOG_PROBE_TIMEOUT_MS: '200',
      WATCHDOG_BOT_TOKEN: BOT_TOKEN,
      WATCHDOG_ADMIN_CHAT_ID: CHAT_ID,
      WATCHDOG_BOT_API_URL: telegram.apiUrl,
    },
  });
}, 30_000);
afterAll(async () => {
  await t?.close();
  await telegram?.close();
});

async function runningAgent(user: { id: string; cookie: string }) {
  const res = await t.backend.inject({
    method: 'POST',
    url: '/api/deployments',
    headers: bearer(t),
    payload: { userId: user.id, name: 'Routes' },
  });
  expect(res.statusCode).toBe(202);
  const id = res.json().agent.id as string;
  await eventually(
    async () =>
      (await t.web.inject({ method: 'GET', url: `/api/agents/${id}/watchdog`, headers: { cookie: user.cookie } })).json().state ===
      'running',
    15_000,
  );
  return id;
}

describe('GET /api/agents/:id/watchdog', () => {
  it('web: the owner sees state and history; the agent response carries the state', async () => {
    const alice = await subscriber(t, 'network');
    const id = await runningAgent(alice);
    const res = await t.web.inject({ method: 'GET', url: `/api/agents/${id}/watchdog`, headers: { cookie: alice.cookie } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ agentId: id, state: 'running', repairAttempts: 0, lastError: null });
    expect(res.json().history.map((h: { to: string }) => h.to)).toEqual(['running', 'starting']);
    const agent = await t.web.inject({ method: 'GET', url: `/api/agents/${id}`, headers: { cookie: alice.cookie } });
    expect(agent.json().agent.watchdog).toMatchObject({ state: 'running' });
  }, 30_000);

  it("web: 401 without a session, 404 for another user's agent, 400 for a bad limit", async () => {
    const alice = await subscriber(t, 'network');
    const bob = await signUp(t.web);
    const id = await runningAgent(alice);
    expect((await t.web.inject({ method: 'GET', url: `/api/agents/${id}/watchdog` })).statusCode).toBe(401);
    const foreign = await t.web.inject({ method: 'GET', url: `/api/agents/${id}/watchdog`, headers: { cookie: bob.cookie } });
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json()).toEqual({ error: 'Agent not found' });
    for (const limit of ['0', '101', 'x']) {
      const bad = await t.web.inject({
        method: 'GET',
        url: `/api/agents/${id}/watchdog?limit=${limit}`,
        headers: { cookie: alice.cookie },
      });
      expect(bad.statusCode).toBe(400);
      expect(typeof bad.json().error).toBe('string');
    }
  }, 30_000);

  it('backend: bearer key required; another user (or the operator account without x-user-id) gets 404', async () => {
    const alice = await subscriber(t, 'network');
    const bob = await signUp(t.web);
    const id = await runningAgent(alice);
    expect((await t.backend.inject({ method: 'GET', url: `/api/agents/${id}/watchdog` })).statusCode).toBe(401);
    expect((await t.backend.inject({ method: 'GET', url: `/api/agents/${id}/watchdog`, headers: bearer(t) })).statusCode).toBe(404);
    expect(
      (await t.backend.inject({ method: 'GET', url: `/api/agents/${id}/watchdog`, headers: { ...bearer(t), 'x-user-id': 'nope' } })).json(),
    ).toEqual({ error: 'Invalid user id' });
    expect(
      (await t.backend.inject({ method: 'GET', url: `/api/agents/${id}/watchdog`, headers: { ...bearer(t), 'x-user-id': bob.id } }))
        .statusCode,
    ).toBe(404);
    const ok = await t.backend.inject({
      method: 'GET',
      url: `/api/agents/${id}/watchdog`,
      headers: { ...bearer(t), 'x-user-id': alice.id },
    });
    expect(ok.json().state).toBe('running');
    const agent = await t.backend.inject({ method: 'GET', url: `/api/agents/${id}`, headers: { ...bearer(t), 'x-user-id': alice.id } });
    expect(agent.json().watchdog).toMatchObject({ state: 'running' });
  }, 30_000);
});

describe('repair through a driver without stop, notifications retried', () => {
  it('a unit in error is repaired by restart; the refused notification is delivered once on retry', async () => {
    const alice = await subscriber(t, 'network');
    const id = await runningAgent(alice);
    telegram.failNext = 1;
    t.driver.units.get(id)!.status = 'error';
    await eventually(async () => {
      const v = (await t.web.inject({ method: 'GET', url: `/api/agents/${id}/watchdog`, headers: { cookie: alice.cookie } })).json();
      return v.state === 'running' && v.history.some((h: { kind: string; ok: boolean }) => h.kind === 'repair' && h.ok);
    }, 15_000);
    expect(t.driver.calls.filter((c) => c.agentId === id && c.op === 'restart')).toHaveLength(1);
    const mine = () => telegram.messages.filter((m) => m.text.includes(id));
    await eventually(async () => mine().length === 2, 15_000, 100);
    // the refused one (degraded) arrives after the repair notice, once
    expect(mine().filter((m) => /degraded/.test(m.text))).toHaveLength(1);
    expect(mine().filter((m) => /repair attempt 1\/2 succeeded/.test(m.text))).toHaveLength(1);
    // the receiver answered before the sender recorded it: wait for the row
    await eventually(async () => {
      const rows = await t.database.db.kysely.selectFrom('watchdog_notifications').select(['status', 'attempts']).execute();
      return rows.length === 2 && rows.every((r) => r.status === 'sent') && rows.some((r) => r.attempts === 2);
    }, 10_000);
    // the request role never sees the operator's outbox
    expect(await t.database.db.withUser(alice.id, (trx) => trx.selectFrom('watchdog_notifications').selectAll().execute())).toEqual([]);
  }, 30_000);
});
