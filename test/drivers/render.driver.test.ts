/**
 * The render driver against a local fake of the Render REST API: the whole lifecycle, the
 * environment and plan it creates services with, idempotent deploys, and the API being down.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { containerHealth, waitForHealthy } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import {
  type AgentDeploySpec,
  AgentNotDeployedError,
  type HostingDriver,
  HostingUnavailableError,
} from '../../src/domains/agents/drivers/driver.contract.ts';
import { createHostingDriver, type DriverConfig, planResources } from '../../src/domains/agents/drivers/driver-registry.service.ts';
import { type FakeRenderApi, startFakeRenderApi } from '../fakes/render-api.ts';

const TOKEN = 'r'.repeat(48);
let render: FakeRenderApi;
let driver: HostingDriver;

const config = (over: Partial<DriverConfig> = {}): DriverConfig => ({
  HOSTING_DRIVER: 'render',
  HOSTING_API_URL: render.url,
  HOSTING_API_KEY: 'render-key',
  HOSTING_OWNER_ID: 'tea-owner',
  AGENT_IMAGE: 'ghcr.io/openclaw/openclaw:latest',
  AGENT_RUNTIME: 'builtin',
  DATA_DIR: '/nonexistent',
  ...over,
});

const spec = (over: Partial<AgentDeploySpec> = {}): AgentDeploySpec => ({
  agentId: 'r1',
  userId: 'user-1',
  plan: 'collective',
  gatewayToken: TOKEN,
  platformApiKey: 'scoped',
  backendUrl: 'https://backend.example',
  config: { logging: { level: 'info' } },
  env: { AGENT_MODEL_BASE_URL: 'https://models.example/v1', DATABASE_URL: 'postgres://secret', WALLET_ENCRYPTION_KEY: 'k' },
  ...over,
});

beforeAll(async () => {
  render = await startFakeRenderApi({ apiKey: 'render-key', deployMs: 150 });
  driver = createHostingDriver(config());
});
afterAll(async () => {
  await render?.close();
});

describe('render driver', () => {
  it('maps plans to the §4.7 resources', () => {
    expect(planResources('underground')).toMatchObject({ memoryMb: 2048, cpus: 1 });
    expect(planResources('pro')).toMatchObject({ memoryMb: 4096, cpus: 2, renderPlan: 'pro' });
    expect(planResources('scale')).toMatchObject({ memoryMb: 8192, cpus: 4 });
    expect(planResources('enterprise')).toMatchObject({ memoryMb: 16384, cpus: 4 });
    expect(planResources('white_glove')).toMatchObject({ memoryMb: 32768, cpus: 8, renderPlan: 'pro_ultra' });
    expect(planResources('collective')).toMatchObject({ plan: 'pro', memoryMb: 4096 });
    expect(planResources('standard')).toMatchObject({ renderPlan: 'standard', memoryMb: 2048 });
    expect(planResources('nonsense')).toMatchObject({ plan: 'starter', memoryMb: 2048, cpus: 1 });
  });

  it('runs deploy → status → restart → suspend → resume → delete', async () => {
    const deployment = await driver.deploy(spec());
    expect(deployment.status).toBe('starting');
    expect(deployment.externalId).toMatch(/^srv-/);
    const service = render.services.get(deployment.externalId)!;
    expect(service).toMatchObject({
      name: 'agent-r1',
      ownerId: 'tea-owner',
      type: 'web_service',
      image: { imagePath: 'ghcr.io/openclaw/openclaw:latest' },
    });
    expect(service.serviceDetails).toMatchObject({ runtime: 'image', plan: 'pro', healthCheckPath: '/healthz' });
    const env = Object.fromEntries(service.envVars.map((e) => [e.key, e.value]));
    expect(env).toMatchObject({
      AGENT_GATEWAY_TOKEN: TOKEN,
      OPENCLAW_GATEWAY_PORT: '18789',
      AGENT_PLAN: 'collective',
      AGENT_PLATFORM_API_KEY: 'scoped',
      NODE_ENV: 'production',
      HOME: '/home/node',
    });
    expect(env.AGENT_MODEL_BASE_URL).toBe('https://models.example/v1');
    for (const secret of ['DATABASE_URL', 'INTERNAL_API_KEY', 'WALLET_ENCRYPTION_KEY']) expect(env[secret]).toBeUndefined();

    expect((await driver.status('r1')).status).toBe('starting');
    expect(await waitForHealthy(deployment.url, { timeoutMs: 5_000, intervalMs: 50 })).toBe(true);
    expect(await driver.status('r1')).toEqual({ status: 'running', url: deployment.url });
    expect((await containerHealth(driver, 'r1')).status).toBe('healthy');

    await driver.restart('r1');
    expect(service.restarts).toBe(1);

    await driver.suspend('r1');
    expect((await driver.status('r1')).status).toBe('suspended');
    expect((await containerHealth(driver, 'r1')).status).toBe('suspended');
    await driver.resume('r1');
    expect((await driver.status('r1')).status).toBe('running');

    const logs = await driver.logs('r1', { limit: 10 });
    expect(logs.map((l) => l.message)).toEqual(['image pulled', 'agent runtime listening']);
    expect(logs[0]).toMatchObject({ level: 'warn', source: 'build' });
    const stats = await driver.stats('r1');
    expect(stats).toMatchObject({ cpu: 25, memory: 512 * 1024 * 1024, memoryPercent: 12.5, status: 'running', pids: 0 });

    await driver.delete('r1');
    expect(render.services.size).toBe(0);
    expect(await driver.status('r1')).toEqual({ status: 'not_found' });
    await expect(driver.delete('r1')).resolves.toBeUndefined();
    await expect(driver.restart('r1')).rejects.toBeInstanceOf(AgentNotDeployedError);
  });

  it('deploy is idempotent: the same spec adopts the service, a changed one updates env vars and redeploys', async () => {
    const first = await driver.deploy(spec({ agentId: 'r2' }));
    await waitForHealthy(first.url, { timeoutMs: 5_000, intervalMs: 50 });
    const again = await driver.deploy(spec({ agentId: 'r2' }));
    expect(again).toEqual({ externalId: first.externalId, url: first.url, status: 'running' });
    const service = render.services.get(first.externalId)!;
    expect(service.deploys).toHaveLength(1);
    const changed = await driver.deploy(spec({ agentId: 'r2', config: { logging: { level: 'debug' } } }));
    expect(changed.status).toBe('starting');
    expect(service.deploys).toHaveLength(2);
    expect(service.envVars.find((e) => e.key === 'AGENT_CONFIG_JSON')!.value).toContain('debug');
    await driver.delete('r2');
  });

  it('throws HostingUnavailableError when the API is down, unreachable, rejects the key or has no key', async () => {
    render.down = true;
    try {
      await expect(driver.deploy(spec({ agentId: 'r3' }))).rejects.toBeInstanceOf(HostingUnavailableError);
      await expect(driver.status('r3')).rejects.toBeInstanceOf(HostingUnavailableError);
    } finally {
      render.down = false;
    }
    const unreachable = createHostingDriver(config({ HOSTING_API_URL: 'http://127.0.0.1:9/v1' }));
    await expect(unreachable.status('r3')).rejects.toBeInstanceOf(HostingUnavailableError);
    const badKey = createHostingDriver(config({ HOSTING_API_KEY: 'wrong' }));
    await expect(badKey.deploy(spec({ agentId: 'r3' }))).rejects.toBeInstanceOf(HostingUnavailableError);
    const noKey = createHostingDriver(config({ HOSTING_API_KEY: undefined }));
    await expect(noKey.deploy(spec({ agentId: 'r3' }))).rejects.toBeInstanceOf(HostingUnavailableError);
    expect(render.services.size).toBe(0);
    await expect(createHostingDriver(config()).shutdown()).resolves.toBeUndefined();
  });

  it('refuses driver kinds that are not built', () => {
    expect(() => createHostingDriver(config({ HOSTING_DRIVER: 'nomad' as DriverConfig['HOSTING_DRIVER'] }))).toThrow(/not available/);
  });
});
