/**
 * Agent operations under concurrency and without a user context: parallel deployments of one agent
 * (one job, no deadlock), another user's agentId (404, never 500), instance actions on many agents
 * at once, and the §4.7 backend rows called with the bearer key alone (the operator account).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATOR_USER_ID } from '../../src/http/backend/acting-user.ts';
import { signUp } from '../helpers/platform.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from './helpers.ts';

let t: AgentsTestPlatform;
let alice: string;
let bob: string;

beforeAll(async () => {
  t = await startAgentsPlatform();
  alice = (await signUp(t.web)).id;
  bob = (await signUp(t.web)).id;
});
afterAll(() => t.close());

const inject = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, userId: string | null, payload?: unknown) =>
  t.backend.inject({
    method,
    url,
    headers: userId ? { ...bearer(t), 'x-user-id': userId } : bearer(t),
    ...(payload !== undefined ? { payload: payload as object } : {}),
  });

describe('POST /api/deployments in parallel (one agent)', () => {
  it('an existing agent: every request answers 202 with the same job, one deployment row, no deadlock', async () => {
    t.driver.deployDelayMs = 200; // keep the first job active while the others arrive
    try {
      const agent = (await inject('POST', '/api/agents', alice, { name: 'Raced', config: { plan: 'collective' } })).json();
      const res = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          inject('POST', '/api/deployments', alice, { name: 'Raced', agentId: agent.id, plan: 'collective', config: { n: i } }),
        ),
      );
      expect(res.map((r) => r.statusCode)).toEqual(Array(12).fill(202));
      const jobIds = new Set(res.map((r) => r.json().deployment.id));
      const rows = await t.database.db.kysely.selectFrom('deployments').select(['id', 'status']).where('agent_id', '=', agent.id).execute();
      // joined while active; a request arriving after the job finished may start one more, never in parallel
      expect(rows.length).toBe(jobIds.size);
      expect(rows.filter((r) => r.status === 'queued' || r.status === 'running').length).toBeLessThanOrEqual(1);
      await eventually(async () => (await inject('GET', `/api/agents/${agent.id}`, alice)).json().status === 'running');
    } finally {
      t.driver.deployDelayMs = 0;
    }
  });

  it('a new agentId: the agent is created once and every request joins its job', async () => {
    const agentId = `fresh-${Date.now().toString(36)}`;
    const res = await Promise.all(
      Array.from({ length: 8 }, () => inject('POST', '/api/deployments', bob, { name: 'Fresh', agentId, plan: 'collective' })),
    );
    expect(res.map((r) => (r.statusCode === 202 ? 202 : r.body))).toEqual(Array(8).fill(202));
    expect(new Set(res.map((r) => r.json().agent.id))).toEqual(new Set([agentId]));
    const n = await t.database.db.kysely
      .selectFrom('agents')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(Number(n.n)).toBe(1);
  });

  it("another user's agentId is 404, exactly like a missing one, and changes nothing", async () => {
    const agent = (await inject('POST', '/api/agents', alice, { name: 'Not yours' })).json();
    const res = await inject('POST', '/api/deployments', bob, { name: 'Steal', agentId: agent.id });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: 'Agent not found' });
    const row = await t.database.db.kysely
      .selectFrom('agents')
      .select(['user_id', 'status', 'name'])
      .where('id', '=', agent.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ user_id: alice, status: 'pending', name: 'Not yours' });
    const jobs = await t.database.db.kysely.selectFrom('deployments').select('id').where('agent_id', '=', agent.id).execute();
    expect(jobs).toEqual([]);
  });
});

describe('instance actions on many agents', () => {
  it('POST /api/instance/:userId/restart deploys every agent again, concurrently, and reports each', async () => {
    const u = await subscriber(t, 'network');
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await t.web.inject({
        method: 'POST',
        url: '/api/agents/provision',
        headers: { cookie: u.cookie },
        payload: { name: `Fleet ${i}` },
      });
      expect(r.statusCode).toBe(201);
      ids.push(r.json().agent.id);
    }
    for (const id of ids) await eventually(async () => (await inject('GET', `/api/agents/${id}`, u.id)).json().status === 'running');

    // a restart deploys each agent again from its stored record; every agent is answered at once,
    // and their deployment jobs run side by side (the worker's concurrency)
    const original = t.driver.deploy.bind(t.driver);
    let inFlight = 0;
    let maxInFlight = 0;
    const before = t.driver.deploys.length;
    t.driver.deploy = async (spec) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        // wait (bounded) until others have arrived, so overlap does not depend on scheduling luck
        for (let i = 0; i < 100 && inFlight < 2 && maxInFlight < 2; i++) await new Promise((r) => setTimeout(r, 10));
        return await original(spec);
      } finally {
        inFlight--;
      }
    };
    try {
      const started = Date.now();
      const res = await t.web.inject({ method: 'POST', url: `/api/instance/${u.id}/restart`, headers: { cookie: u.cookie }, payload: {} });
      expect(res.statusCode).toBe(200);
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(new Set(res.json().agents.map((a: { id: string }) => a.id))).toEqual(new Set(ids));
      expect(res.json().agents.every((a: { status: string }) => a.status === 'provisioning')).toBe(true);
      for (const id of ids) await eventually(async () => (await inject('GET', `/api/agents/${id}`, u.id)).json().status === 'running');
      expect(t.driver.deploys.length - before).toBe(ids.length);
      expect(maxInFlight).toBeGreaterThan(1);
    } finally {
      t.driver.deploy = original;
    }
  });
});

describe('§4.7 backend rows with the bearer key alone (operator account)', () => {
  it('POST, GET and DELETE /api/agents work without x-user-id and act on the operator account only', async () => {
    const created = await inject('POST', '/api/agents', null, { name: 'Ops agent' });
    expect(created.statusCode).toBe(201);
    const a = created.json();
    expect(a).toMatchObject({ name: 'Ops agent', agentId: a.id, status: 'pending' });
    const row = await t.database.db.kysely.selectFrom('agents').select('user_id').where('id', '=', a.id).executeTakeFirstOrThrow();
    expect(row.user_id).toBe(OPERATOR_USER_ID);

    const list = await inject('GET', '/api/agents', null);
    expect(list.statusCode).toBe(200);
    expect(list.json().map((x: { id: string }) => x.id)).toContain(a.id);
    // a user's agents are not the operator's
    const alices = (await inject('POST', '/api/agents', alice, { name: 'Alice only' })).json();
    expect(list.json().map((x: { id: string }) => x.id)).not.toContain(alices.id);
    expect((await inject('GET', '/api/agents', null)).json().map((x: { id: string }) => x.id)).not.toContain(alices.id);
    expect((await inject('GET', '/api/agents', alice)).json().map((x: { id: string }) => x.id)).not.toContain(a.id);

    // deleting a user's agent without naming the user touches nothing; an unknown id still succeeds
    expect((await inject('DELETE', `/api/agents/${alices.id}`, null)).json()).toEqual({ id: alices.id, deleted: true });
    expect((await inject('GET', `/api/agents/${alices.id}`, alice)).statusCode).toBe(200);
    expect((await inject('DELETE', '/api/agents/no-such-agent', null)).json()).toEqual({ id: 'no-such-agent', deleted: true });

    const del = await inject('DELETE', `/api/agents/${a.id}`, null);
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ id: a.id, deleted: true });
    expect((await inject('GET', '/api/agents', null)).json().map((x: { id: string }) => x.id)).not.toContain(a.id);
  });

  it('a malformed x-user-id is still 400', async () => {
    const bad = await t.backend.inject({ method: 'GET', url: '/api/agents', headers: { ...bearer(t), 'x-user-id': "1' or 1=1" } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: 'Invalid user id' });
  });

  it('nobody can sign in as the operator account', async () => {
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: 'operator@operator.invalid', password: 'anything-at-all' },
    });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
  });
});
