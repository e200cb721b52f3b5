/**
 * The docker driver inside the platform (backend routes, deployment worker, PostgreSQL) against
 * the fake Docker Engine: a deploy whose create the engine fails is retried by the job into one
 * running container whose gateway the platform probes, the routes read logs and stats from the
 * engine, and an engine that is down answers callers the §4.7 `Hosting unavailable` body.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDockerDriver } from '../../src/domains/agents/drivers/docker/docker.driver.ts';
import type { HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import { type AgentsTestPlatform, deployThroughOneFailure, startAgentsPlatform } from '../agents/helpers.ts';
import { type FakeDockerEngine, startFakeDockerEngine } from '../fakes/docker-engine.ts';
import { signUp } from '../helpers/platform.ts';

const IMAGE = 'ghcr.io/example/agent:1';
let engine: FakeDockerEngine;
let t: AgentsTestPlatform<HostingDriver>;

beforeAll(async () => {
  engine = await startFakeDockerEngine();
  const driver = createDockerDriver({ dockerHost: engine.unixHost, image: IMAGE, timeoutMs: 2_000 });
  t = await startAgentsPlatform<HostingDriver>({ driver, env: { CONTAINER_HEALTH_RETRIES: '1', CONTAINER_HEALTH_INTERVAL_MS: '50' } });
  await t.platform.watchdogWorker?.stop();
}, 60_000);
afterAll(async () => {
  await t?.close();
  await engine?.close();
});

describe('docker driver in the platform', () => {
  it('a failed create is retried by the deploy job into one running container; a down engine answers Hosting unavailable', async () => {
    const user = await signUp(t.web);
    engine.fail('POST', /^\/containers\/create$/, 500);
    // the first attempt failed on create and was queued again with a message naming only the call
    const { agent, headers, firstError, attempts } = await deployThroughOneFailure(t, user.id, 'D');
    expect(firstError).toBe('docker engine create: answered 500');
    expect(attempts).toBe(2);

    // the image was not on the engine: pulled once, then one container with the platform's own secrets kept out
    expect(engine.requests.filter((r) => r.path === '/images/create')).toHaveLength(1);
    const containers = [...engine.containers.values()];
    expect(containers).toHaveLength(1);
    const c = containers[0]!;
    expect(c.Name).toBe(`/agent-${agent.id}`);
    const env = c.Config.Env.join('\n');
    for (const secret of [t.config.INTERNAL_API_KEY, t.config.DATABASE_URL, t.config.SECRETS_ENCRYPTION_KEY].filter(Boolean))
      expect(env).not.toContain(secret as string);
    expect(env).not.toMatch(/^(DATABASE_URL|INTERNAL_API_KEY|WALLET_ENCRYPTION_KEY)=/m);
    // the backend's default plan, label, runs at §4.7 scale size
    expect(c.HostConfig).toMatchObject({ Memory: 8192 * 1024 * 1024, NanoCpus: 4e9 });

    const port = c.NetworkSettings.Ports['18789/tcp']![0]!.HostPort;
    const a = (await t.backend.inject({ method: 'GET', url: `/api/agents/${agent.id}`, headers })).json();
    expect(a).toMatchObject({ status: 'running', gatewayUrl: `http://127.0.0.1:${port}` });
    const health = await t.backend.inject({ method: 'GET', url: `/api/agents/${agent.id}/health`, headers });
    expect(health.json()).toMatchObject({ status: 'healthy' });
    const logs = await t.backend.inject({ method: 'GET', url: `/api/agents/${agent.id}/logs?limit=5`, headers });
    expect(logs.statusCode).toBe(200);
    expect(logs.json().logs.map((l: { message: string }) => l.message)).toContain('gateway listening on 18789');
    c.usage = { ...c.usage, memory: 512 * 1024 * 1024, pids: 9 };
    const stats = await t.backend.inject({ method: 'GET', url: `/api/agents/${agent.id}/stats`, headers });
    expect(stats.statusCode).toBe(200);
    // 512 MiB of the plan's 8 GiB
    expect(stats.json().stats).toMatchObject({ memory: 512 * 1024 * 1024, memoryPercent: 6.25, pids: 9 });

    engine.down = true;
    try {
      for (const url of [`/api/agents/${agent.id}/logs`, `/api/agents/${agent.id}/stats`, `/api/agents/${agent.id}/health`]) {
        const r = await t.backend.inject({ method: 'GET', url, headers });
        expect(r.statusCode).toBe(500);
        expect(r.json()).toEqual({ error: 'Hosting unavailable', code: 'HOSTING_UNAVAILABLE' });
      }
    } finally {
      engine.down = false;
    }
    // stop stops the container (the driver's stop, never a pause that keeps its memory); the engine says so
    const stop = await t.backend.inject({ method: 'POST', url: `/api/agents/${agent.id}/stop`, headers });
    expect(stop.statusCode).toBe(200);
    expect(c.State.Status).toBe('exited');
    expect((await t.driver.status(agent.id)).status).toBe('stopped');
  }, 40_000);
});
