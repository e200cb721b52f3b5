/**
 * §3 "Container health status" as the backend reports it (GET /api/agents/:id/health) for both
 * drivers: `healthy` (running, /healthz answers), `starting` (running, /healthz silent after all
 * retries), `suspended`, `stopped`, `not_found`, `error`. Render through the fake Render API
 * (whose service URLs answer /healthz like an agent); local with real processes. The watchdog
 * is off here, so nothing repairs the faults made on purpose.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import { createRenderDriver } from '../../src/domains/agents/drivers/render/render.driver.ts';
import { type AgentsTestPlatform, eventually, startAgentsPlatform } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { type FakeRenderApi, startFakeRenderApi } from '../fakes/render-api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { signUp } from '../helpers/platform.ts';
import { bearer, deployAgent, pidOf, type RunningPlatform, startPlatform } from './helpers.ts';

const health = async (app: AgentsTestPlatform['backend'], agentId: string, userId: string, headers: Record<string, string>) => {
  const res = await app.inject({ method: 'GET', url: `/api/agents/${agentId}/health`, headers: { ...headers, 'x-user-id': userId } });
  return { code: res.statusCode, body: res.json() as { agentId: string; status: string; url: string | null; checkedAt: string } };
};

describe('render driver', () => {
  let render: FakeRenderApi;
  let t: AgentsTestPlatform<HostingDriver>;
  beforeAll(async () => {
    render = await startFakeRenderApi({ apiKey: 'render-key', deployMs: 50 });
    const driver = createRenderDriver({ apiUrl: render.url, apiKey: 'render-key', ownerId: 'own-1', image: 'img' });
    t = await startAgentsPlatform<HostingDriver>({ driver, env: { CONTAINER_HEALTH_RETRIES: '2', CONTAINER_HEALTH_INTERVAL_MS: '50' } });
    await t.platform.watchdogWorker?.stop();
  }, 30_000);
  afterAll(async () => {
    await t?.close();
    await render?.close();
  });

  it('healthy, starting, suspended, stopped, error, not_found by the §3 conditions', async () => {
    const user = await signUp(t.web);
    const dep = await t.backend.inject({
      method: 'POST',
      url: '/api/deployments',
      headers: { authorization: `Bearer ${t.config.INTERNAL_API_KEY}` },
      payload: { userId: user.id, name: 'R' },
    });
    const id = dep.json().agent.id as string;
    const h = (extra = {}) => health(t.backend, id, user.id, { authorization: `Bearer ${t.config.INTERNAL_API_KEY}`, ...extra });
    await eventually(async () => (await h()).body.status === 'healthy', 15_000);
    const service = [...render.services.values()].find((s) => s.name === `agent-${id}`)!;

    render.unhealthy.add(service.id);
    expect((await h()).body.status).toBe('starting'); // live, but /healthz silent after all retries
    render.unhealthy.delete(service.id);

    expect(
      (
        await t.backend.inject({
          method: 'POST',
          url: `/api/agents/${id}/stop`,
          headers: { authorization: `Bearer ${t.config.INTERNAL_API_KEY}`, 'x-user-id': user.id },
        })
      ).statusCode,
    ).toBe(200);
    expect((await h()).body.status).toBe('suspended');
    service.suspended = 'not_suspended';

    service.deploys.at(-1)!.status = 'deactivated';
    expect((await h()).body.status).toBe('stopped');
    service.deploys.at(-1)!.status = 'build_failed';
    expect((await h()).body.status).toBe('error');
    render.services.delete(service.id);
    expect((await h()).body).toMatchObject({ agentId: id, status: 'not_found', url: null });

    // another user's agent is 404; a hosting platform that cannot be reached is 500
    const bob = await signUp(t.web);
    expect((await health(t.backend, id, bob.id, { authorization: `Bearer ${t.config.INTERNAL_API_KEY}` })).code).toBe(404);
    render.down = true;
    try {
      const down = await h();
      expect(down.code).toBe(500);
      expect(down.body).toMatchObject({ error: 'Hosting unavailable' });
    } finally {
      render.down = false;
    }
  }, 30_000);
});

describe('local driver (real processes)', () => {
  let database: TestDatabase;
  let dataDir: string;
  let upstream: FakeOpenAi;
  let p: RunningPlatform;
  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'container-health-'));
    upstream = await startFakeOpenAi({ apiKey: 'router-key' });
    p = await startPlatform({
      db: database.db,
      dataDir,
      watchdogEnabled: false,
      env: {
        ROUTER_BASE_URL: upstream.baseUrl,
        ROUTER_API_KEY: 'router-key',
        CONTAINER_HEALTH_RETRIES: '2',
        CONTAINER_HEALTH_INTERVAL_MS: '50',
        WATCHDOG_PROBE_TIMEOUT_MS: '500',
      },
    });
  }, 60_000);
  afterAll(async () => {
    await p?.close();
    await p?.driver.shutdown();
    await upstream?.close();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('healthy, stopped, suspended, error (crashed), not_found', async () => {
    const { agentId, owner } = await deployAgent(p, database.db);
    const h = () => health(p.backend, agentId, owner.id, bearer);
    expect((await h()).body.status).toBe('healthy');
    // the owner's Stop ends the process: `stopped` (docs/agents.md "Stop, suspend and restart")
    expect(
      (await p.backend.inject({ method: 'POST', url: `/api/agents/${agentId}/stop`, headers: { ...bearer, 'x-user-id': owner.id } }))
        .statusCode,
    ).toBe(200);
    expect((await h()).body.status).toBe('stopped');
    expect(
      (await p.backend.inject({ method: 'POST', url: `/api/agents/${agentId}/start`, headers: { ...bearer, 'x-user-id': owner.id } }))
        .statusCode,
    ).toBe(200);
    await eventually(async () => (await h()).body.status === 'healthy', 15_000);
    // the driver's suspend: no process either, marked suspended; resume starts it again
    await p.driver.suspend(agentId);
    expect((await h()).body.status).toBe('suspended');
    await p.driver.resume(agentId);
    await eventually(async () => (await h()).body.status === 'healthy', 15_000);
    process.kill(pidOf(dataDir, agentId), 'SIGKILL');
    await eventually(async () => (await h()).body.status === 'error', 10_000);
    await p.driver.delete(agentId); // (its network namespace is a mount: the driver removes it, not rm -r)
    expect((await h()).body.status).toBe('not_found');
  }, 60_000);
});
