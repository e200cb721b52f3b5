/**
 * Lifecycle calls on one agent never collide (docs/agents.md "Lifecycle under concurrency"):
 * twenty start, stop, restart and deploy calls at once, through the web app's routes and the
 * backend's, all answer without a 5xx (before, the deployment transactions deadlocked in
 * PostgreSQL, 40P01, and the caller got 500), and what the database says of the agent at the end
 * is what runs: `running` with its one unit up, or `stopped` with none. The real local driver's
 * one-process count is proved in test/agents/status-truth.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from './helpers.ts';

let t: AgentsTestPlatform;

beforeAll(async () => {
  t = await startAgentsPlatform();
});
afterAll(() => t.close());

describe('20 concurrent lifecycle calls on one agent', () => {
  it('8 rounds from a stopped agent: no 5xx; the agent ends in a state its unit agrees with', async () => {
    const u = await subscriber(t, 'network');
    const prov = await t.web.inject({
      method: 'POST',
      url: '/api/agents/provision',
      headers: { cookie: u.cookie },
      payload: { name: 'Busy' },
    });
    expect(prov.statusCode).toBe(201);
    const id = prov.json().agent.id as string;
    const backend = (method: string, path: string, body?: unknown) =>
      fetch(`${t.backendUrl}${path}`, {
        method,
        headers: { ...bearer(t), 'x-user-id': u.id, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    const status = async () => ((await (await backend('GET', `/api/agents/${id}`)).json()) as { status: string }).status;
    await eventually(async () => (await status()) === 'running');

    // a deploy that takes a while keeps jobs active while the other calls arrive
    t.driver.deployDelayMs = 30;
    try {
      const calls: (() => Promise<{ status: number; body: string; what: string }>)[] = [];
      for (let i = 0; i < 20; i++) {
        const action = (['start', 'stop', 'restart'] as const)[i % 3]!;
        if (i % 5 === 4)
          calls.push(async () => {
            const r = await backend('POST', '/api/deployments', { userId: u.id, agentId: id, name: 'Busy', plan: 'network' });
            return { status: r.status, body: await r.text(), what: 'POST /api/deployments' };
          });
        else if (i % 2 === 0)
          calls.push(async () => {
            const r = await t.web.inject({
              method: 'POST',
              url: `/api/instance/${u.id}/${action}`,
              headers: { cookie: u.cookie },
              payload: { agentId: id },
            });
            return { status: r.statusCode, body: r.body, what: `web ${action}` };
          });
        else
          calls.push(async () => {
            const r = await backend('POST', `/api/agents/${id}/${action}`);
            return { status: r.status, body: await r.text(), what: `backend ${action}` };
          });
      }
      // rounds from a stopped agent: each Start then deploys it again, in a transaction beside the deployments'
      const results = [];
      for (let round = 0; round < 8; round++) {
        expect((await backend('POST', `/api/agents/${id}/stop`)).status).toBe(200);
        results.push(...(await Promise.all(calls.map((c) => c()))));
      }
      expect(results.filter((r) => r.status >= 500)).toEqual([]);
      expect(results.every((r) => r.status >= 200 && r.status < 300)).toBe(true);

      // the jobs the calls queued run out; then the record and the unit agree
      const settled = await eventually(async () => {
        const active = await t.database.db.kysely
          .selectFrom('deployments')
          .select('id')
          .where('agent_id', '=', id)
          .where('status', 'in', ['queued', 'running'])
          .execute();
        const s = await status();
        return active.length === 0 && s !== 'provisioning' ? s : null;
      }, 20_000);
      const unit = t.driver.units.get(id)?.status;
      if (settled === 'running') expect(unit).toBe('healthy');
      else {
        expect(settled).toBe('stopped');
        expect(unit === undefined || unit === 'stopped').toBe(true);
      }
      // and a Start after it all runs it
      expect((await backend('POST', `/api/agents/${id}/start`)).status).toBe(200);
      await eventually(async () => (await status()) === 'running');
      expect(t.driver.units.get(id)?.status).toBe('healthy');
    } finally {
      t.driver.deployDelayMs = 0;
    }
  }, 60_000);
});
