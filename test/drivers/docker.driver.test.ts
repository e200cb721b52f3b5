/**
 * The docker driver against a local fake of the Docker Engine API (dockerode's real client over a
 * unix socket and TCP): what a container is created with, idempotent deploys, the lifecycle, log
 * demultiplexing, stats, pulling a missing image, and the engine being down.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { containerHealth } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import { dockerConnection } from '../../src/domains/agents/drivers/docker/docker.driver.ts';
import { demultiplex, logLines } from '../../src/domains/agents/drivers/docker/docker-observe.service.ts';
import {
  type AgentDeploySpec,
  AgentNotDeployedError,
  type HostingDriver,
  HostingUnavailableError,
} from '../../src/domains/agents/drivers/driver.contract.ts';
import { createHostingDriver, type DriverConfig } from '../../src/domains/agents/drivers/driver-registry.service.ts';
import { type FakeDockerEngine, frame, startFakeDockerEngine } from '../fakes/docker-engine.ts';

const IMAGE = 'ghcr.io/openclaw/openclaw:latest';
const TOKEN = 'd'.repeat(48);
let engine: FakeDockerEngine;
let driver: HostingDriver;

const config = (over: Partial<DriverConfig> = {}): DriverConfig => ({
  HOSTING_DRIVER: 'docker',
  HOSTING_API_URL: 'http://unused.example',
  HOSTING_API_KEY: undefined,
  HOSTING_OWNER_ID: undefined,
  AGENT_IMAGE: IMAGE,
  AGENT_RUNTIME: 'builtin',
  DATA_DIR: '/nonexistent',
  DOCKER_HOST: engine.unixHost,
  ...over,
});

const spec = (over: Partial<AgentDeploySpec> = {}): AgentDeploySpec => ({
  agentId: 'd1',
  userId: 'user-1',
  plan: 'collective',
  gatewayToken: TOKEN,
  platformApiKey: 'scoped-key',
  backendUrl: 'https://backend.example',
  config: { logging: { level: 'info' } },
  env: {
    AGENT_MODEL_BASE_URL: 'https://models.example/v1',
    AGENT_MODEL_API_KEY: 'model-key',
    DATABASE_URL: 'postgres://secret',
    INTERNAL_API_KEY: 'internal',
    WALLET_ENCRYPTION_KEY: 'k',
  },
  ...over,
});

const envOf = (name: string) =>
  Object.fromEntries(engine.byName(name)!.Config.Env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));

beforeAll(async () => {
  engine = await startFakeDockerEngine({ images: [IMAGE] });
  driver = createHostingDriver(config());
});
afterAll(async () => {
  await engine?.close();
});

describe('docker driver', () => {
  it('reads DOCKER_HOST as a unix socket, tcp or http(s) address', () => {
    expect(dockerConnection('unix:///var/run/docker.sock').options).toEqual({
      socketPath: '/var/run/docker.sock',
      host: undefined,
      port: undefined,
    });
    expect(dockerConnection('tcp://10.0.0.5:2375')).toMatchObject({
      options: { host: '10.0.0.5', port: '2375', protocol: 'http' },
      localEngine: false,
    });
    expect(dockerConnection('https://docker.internal').options).toMatchObject({ host: 'docker.internal', port: '2376', protocol: 'https' });
    expect(dockerConnection('http://docker.internal:8080').options).toMatchObject({ port: '8080', protocol: 'http' });
    expect(() => dockerConnection('ssh://me@host')).toThrow(/DOCKER_HOST/);
    expect(() => dockerConnection('unix://relative.sock')).toThrow(/absolute/);
  });

  it('creates one confined container per agent with the plan limits and only its own credentials', async () => {
    const deployment = await driver.deploy(spec());
    const c = engine.byName('agent-d1')!;
    expect(deployment.externalId).toBe(c.Id);
    expect(deployment.status).toBe('starting');
    const port = c.NetworkSettings.Ports['18789/tcp']![0]!;
    expect(port.HostIp).toBe('127.0.0.1');
    expect(deployment.url).toBe(`http://127.0.0.1:${port.HostPort}`);

    expect(c.Config.Image).toBe(IMAGE);
    expect(c.Config.User).toBe('1000:1000');
    expect(c.Config.Labels).toMatchObject({ 'agent-platform/agent-id': 'd1', 'app.kubernetes.io/managed-by': 'agent-platform' });
    expect(c.Config.Labels['agent-platform/spec-hash']).toMatch(/^[0-9a-f]{64}$/);
    expect(c.Config.ExposedPorts).toEqual({ '18789/tcp': {} });
    const hc = c.Config.Healthcheck!;
    expect(hc.Test.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
    expect(hc.Test[3]).toContain('http://127.0.0.1:18789/healthz');
    expect(hc.Test.join(' ')).not.toMatch(/curl|wget/);
    expect(hc).toMatchObject({ Timeout: 5e9, StartPeriod: 60e9 });

    // collective → §4.7 pro: 4 GB, 2 CPUs
    expect(c.HostConfig).toMatchObject({
      Memory: 4096 * 1024 * 1024,
      MemorySwap: 4096 * 1024 * 1024,
      NanoCpus: 2e9,
      PidsLimit: 512,
      ReadonlyRootfs: true,
      Init: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      RestartPolicy: { Name: 'unless-stopped' },
      PortBindings: { '18789/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] },
    });
    expect(Object.keys(c.HostConfig.Tmpfs as object).sort()).toEqual(['/home/node', '/tmp', '/var/tmp']);
    expect(c.HostConfig.Privileged).toBeUndefined();
    expect(c.HostConfig.CapAdd).toBeUndefined();

    const env = envOf('agent-d1');
    expect(env).toMatchObject({
      AGENT_ID: 'd1',
      AGENT_GATEWAY_TOKEN: TOKEN,
      OPENCLAW_GATEWAY_TOKEN: TOKEN,
      OPENCLAW_GATEWAY_PORT: '18789',
      AGENT_PLATFORM_API_KEY: 'scoped-key',
      AGENT_MODEL_BASE_URL: 'https://models.example/v1',
      AGENT_MODEL_API_KEY: 'model-key',
      AGENT_HOST: '0.0.0.0',
      HOME: '/home/node',
    });
    expect(JSON.parse(env.AGENT_CONFIG_JSON!)).toEqual({ logging: { level: 'info' } });
    for (const secret of ['DATABASE_URL', 'INTERNAL_API_KEY', 'WALLET_ENCRYPTION_KEY']) expect(env[secret]).toBeUndefined();
    expect(c.Config.Env.join('\n')).not.toMatch(/postgres:\/\/secret|internal/);

    // the plan decides the limits: solo → starter (2 GB, 1 CPU)
    await driver.deploy(spec({ agentId: 'd1-solo', plan: 'solo' }));
    expect(engine.byName('agent-d1-solo')!.HostConfig).toMatchObject({ Memory: 2048 * 1024 * 1024, NanoCpus: 1e9 });
    await driver.delete('d1-solo');
  });

  it('deploy is idempotent: the same spec adopts the container, a changed spec replaces it', async () => {
    const first = await driver.deploy(spec({ agentId: 'd2' }));
    const creates = () => engine.requests.filter((r) => r.path === '/containers/create').length;
    const before = creates();
    const again = await driver.deploy(spec({ agentId: 'd2' }));
    expect(again).toEqual(first);
    expect(creates()).toBe(before);

    // a stopped container of the same spec is started again, not recreated
    await driver.stop!('d2');
    const restarted = await driver.deploy(spec({ agentId: 'd2' }));
    expect(restarted.externalId).toBe(first.externalId);
    expect(engine.containers.get(first.externalId)!.State.Running).toBe(true);
    expect(creates()).toBe(before);

    const changed = await driver.deploy(spec({ agentId: 'd2', platformApiKey: 'rotated-key' }));
    expect(changed.externalId).not.toBe(first.externalId);
    expect(engine.containers.has(first.externalId)).toBe(false);
    expect(envOf('agent-d2').AGENT_PLATFORM_API_KEY).toBe('rotated-key');
    expect([...engine.containers.values()].filter((c) => c.Config.Labels['agent-platform/agent-id'] === 'd2')).toHaveLength(1);
    await driver.delete('d2');
  });

  it('maps engine states to §3 statuses through restart, stop, suspend, resume and delete', async () => {
    const { url } = await driver.deploy(spec({ agentId: 'd3' }));
    const c = engine.byName('agent-d3')!;
    expect(await driver.status('d3')).toEqual({ status: 'starting', url });
    c.State.Health!.Status = 'healthy';
    expect(await driver.status('d3')).toEqual({ status: 'running', url });
    // the URL reaches the container's gateway: the platform's own probe says healthy, or starting while it is silent
    expect(await containerHealth(driver, 'd3', { retries: 1 })).toEqual({ status: 'healthy', url });
    c.silent = true;
    expect(await containerHealth(driver, 'd3', { retries: 1 })).toEqual({ status: 'starting', url });
    c.silent = false;

    await driver.restart('d3');
    expect(c.RestartCount).toBe(1);
    expect((await driver.status('d3')).status).toBe('starting');

    // suspend scales to zero: the container stops (no process, no memory), its filesystem kept
    await driver.suspend('d3');
    expect(c.State.Status).toBe('exited');
    expect((await driver.status('d3')).status).toBe('stopped');
    await driver.suspend('d3'); // already stopped: nothing to do
    await driver.resume('d3');
    expect(c.State.Status).toBe('running');

    // a container paused (by an earlier version's suspend) reads suspended; suspend stops it, resume starts it
    c.State = { ...c.State, Status: 'paused', Paused: true };
    expect((await driver.status('d3')).status).toBe('suspended');
    await driver.suspend('d3');
    expect(c.State.Status).toBe('exited');
    await driver.resume('d3');
    expect(c.State.Status).toBe('running');

    // the engine refuses to restart a paused container: the driver unpauses it first
    c.State = { ...c.State, Status: 'paused', Paused: true };
    await driver.restart('d3');
    expect(c.State.Status).toBe('running');
    expect(c.RestartCount).toBe(2);

    await driver.stop!('d3');
    expect(await driver.status('d3')).toEqual({ status: 'stopped' });
    await driver.stop!('d3'); // 304 already stopped
    await driver.resume('d3');
    expect(c.State.Running).toBe(true);

    c.State = { ...c.State, Status: 'dead', Running: false, Dead: true };
    expect((await driver.status('d3')).status).toBe('error');

    await driver.delete('d3');
    expect(engine.byName('agent-d3')).toBeUndefined();
    expect(await driver.status('d3')).toEqual({ status: 'not_found' });
    await expect(driver.delete('d3')).resolves.toBeUndefined();
    for (const op of ['restart', 'suspend', 'resume', 'stop'] as const)
      await expect(driver[op]!('d3')).rejects.toBeInstanceOf(AgentNotDeployedError);
    expect(await driver.logs('d3', { limit: 10 })).toEqual([]);
    expect((await driver.stats('d3')).status).toBe('not_found');
  });

  it('demultiplexes the log stream into LogLines, oldest first, with levels', async () => {
    await driver.deploy(spec({ agentId: 'd4' }));
    const c = engine.byName('agent-d4')!;
    const t = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s)).toISOString();
    c.output = [
      { stream: 1, at: t(1), text: 'gateway listening on 18789' },
      { stream: 2, at: t(2), text: 'Error: upstream refused' },
      { stream: 1, at: t(3), text: JSON.stringify({ level: 40, time: 0, msg: 'slow model', source: 'runtime' }) },
      { stream: 1, at: t(4), text: `long ${'x'.repeat(70_000)}` },
      { stream: 2, at: t(5), text: 'warning: low disk' },
    ];
    const lines = await driver.logs('d4', { limit: 10 });
    expect(lines.map((l) => [l.timestamp, l.level, l.source])).toEqual([
      [t(1), 'info', 'stdout'],
      [t(2), 'error', 'stderr'],
      [t(3), 'warn', 'runtime'],
      [t(4), 'info', 'stdout'],
      [t(5), 'warn', 'stderr'],
    ]);
    expect(lines[0]!.message).toBe('gateway listening on 18789');
    expect(lines[2]!.message).toBe('slow model');
    expect(lines[3]!.message).toHaveLength(70_005);
    expect((await driver.logs('d4', { limit: 2 })).map((l) => l.timestamp)).toEqual([t(4), t(5)]);
    expect((await driver.logs('d4', { limit: 10, level: 'warn' })).map((l) => l.message)).toEqual(['slow model', 'warning: low disk']);
    const req = engine.requests.filter((r) => r.path.endsWith('/logs')).at(-1)!;
    expect(Object.fromEntries(req.query)).toMatchObject({ stdout: 'true', stderr: 'true', timestamps: 'true', follow: 'false' });

    // framing across one buffer: several frames, both streams, a TTY body passed through
    const body = Buffer.concat([frame(1, 'a\nb\n'), frame(2, 'c\n'), frame(1, 'd\n')]);
    expect(demultiplex(body)).toEqual({ stdout: 'a\nb\nd\n', stderr: 'c\n' });
    expect(demultiplex(Buffer.from('plain tty output\n'))).toEqual({ stdout: 'plain tty output\n', stderr: '' });
    expect(logLines(Buffer.alloc(0))).toEqual([]);
    await driver.delete('d4');
  });

  it('reports stats from one stats sample', async () => {
    await driver.deploy(spec({ agentId: 'd5' }));
    const c = engine.byName('agent-d5')!;
    c.State.StartedAt = new Date(Date.now() - 120_000).toISOString();
    // 0.5 s of CPU over 2 s of the machine's 4 CPUs: 100% of one core
    c.usage = {
      cpuNs: 1.5e9,
      preCpuNs: 1e9,
      systemNs: 10e9,
      preSystemNs: 8e9,
      cpus: 4,
      memory: 1200 * 1024 * 1024,
      inactiveFile: 176 * 1024 * 1024,
      rx: 1234,
      tx: 5678,
      pids: 17,
    };
    const stats = await driver.stats('d5');
    expect(stats).toMatchObject({
      cpu: 100,
      memory: 1024 * 1024 * 1024,
      memoryPercent: 25,
      network: { rxBytes: 1234, txBytes: 5678 },
      pids: 17,
      status: 'starting',
    });
    expect(stats.uptime).toBeGreaterThanOrEqual(119);
    expect(stats.uptime).toBeLessThan(200);
    expect(Object.fromEntries(engine.requests.filter((r) => r.path.endsWith('/stats')).at(-1)!.query)).toMatchObject({ stream: 'false' });

    await driver.stop!('d5');
    expect(await driver.stats('d5')).toMatchObject({ cpu: 0, memory: 0, pids: 0, status: 'stopped' });
    await driver.delete('d5');
  });

  it('pulls the image when create answers 404 "No such image", and reports a failed pull', async () => {
    const image = 'registry.example/agents/runtime:2';
    const pulling = createHostingDriver(config({ AGENT_IMAGE: image }));
    const deployment = await pulling.deploy(spec({ agentId: 'd6' }));
    expect(engine.byName('agent-d6')!.Config.Image).toBe(image);
    expect(deployment.status).toBe('starting');
    const pull = engine.requests.find((r) => r.path === '/images/create')!;
    expect(Object.fromEntries(pull.query)).toMatchObject({ fromImage: 'registry.example/agents/runtime', tag: '2' });
    expect(engine.requests.filter((r) => r.path === '/containers/create' && (r.body as { Image: string }).Image === image)).toHaveLength(2);
    await pulling.delete('d6');

    engine.pullError = 'manifest for registry.example/agents/missing:1 not found';
    const missing = createHostingDriver(config({ AGENT_IMAGE: 'registry.example/agents/missing:1' }));
    const failed = (await missing.deploy(spec({ agentId: 'd7' })).catch((e: unknown) => e)) as Error;
    // the message reaches the agent's owner (the job's error); the engine's text is kept for the logs
    expect(failed.message).toBe('docker engine could not pull the agent image');
    expect(String(failed.cause)).toMatch(/registry\.example\/agents\/missing:1: manifest .* not found/);
    expect(engine.byName('agent-d7')).toBeUndefined();
  });

  it('throws HostingUnavailableError when the engine is down, absent or failing, and works over tcp', async () => {
    engine.down = true;
    try {
      await expect(driver.deploy(spec({ agentId: 'd8' }))).rejects.toBeInstanceOf(HostingUnavailableError);
      await expect(driver.status('d8')).rejects.toBeInstanceOf(HostingUnavailableError);
      await expect(driver.delete('d8')).rejects.toBeInstanceOf(HostingUnavailableError);
    } finally {
      engine.down = false;
    }
    const absent = createHostingDriver(config({ DOCKER_HOST: 'unix:///nonexistent/docker.sock' }));
    const error = (await absent.status('d8').catch((e: unknown) => e)) as Error;
    expect(error).toBeInstanceOf(HostingUnavailableError);
    expect(error.message).toBe('docker engine list containers: unreachable');
    expect(String(error.cause)).toContain('/nonexistent/docker.sock');
    const refused = createHostingDriver(config({ DOCKER_HOST: 'tcp://127.0.0.1:9' }));
    await expect(refused.logs('d8', { limit: 5 })).rejects.toBeInstanceOf(HostingUnavailableError);

    engine.fail('POST', /^\/containers\/create$/, 500);
    await expect(driver.deploy(spec({ agentId: 'd8' }))).rejects.toBeInstanceOf(HostingUnavailableError);
    expect(engine.byName('agent-d8')).toBeUndefined();
    // a 4xx is a refusal of this request, not an outage
    engine.fail('POST', /^\/containers\/create$/, 400);
    const refusal = await driver.deploy(spec({ agentId: 'd8' })).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(Error);
    expect(refusal).not.toBeInstanceOf(HostingUnavailableError);

    // the same engine over TCP: the URL host is the engine's, the port published on all interfaces
    const tcp = createHostingDriver(config({ DOCKER_HOST: engine.tcpHost }));
    const deployment = await tcp.deploy(spec({ agentId: 'd9' }));
    expect(engine.byName('agent-d9')!.NetworkSettings.Ports['18789/tcp']![0]!.HostIp).toBe('0.0.0.0');
    expect(deployment.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await tcp.delete('d9');
    await expect(tcp.shutdown()).resolves.toBeUndefined();
  });
});
