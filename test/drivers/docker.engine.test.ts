/**
 * The docker driver against a real engine, when one is given: DOCKER_TEST_HOST (a DOCKER_HOST
 * value, e.g. unix:///var/run/docker.sock or a `podman system service` socket) and
 * DOCKER_TEST_IMAGE (an image on that engine whose process serves GET /healthz on 18789 and has
 * `node` on its PATH, such as the OpenClaw image). Skipped otherwise; docs/agents.md "Docker
 * driver" says how it was run. What the fake cannot show: the engine accepts the create body and
 * really confines the process (uid, capabilities, no_new_privs, read-only root, limits).
 */
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { containerHealth, waitForHealthy } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import { createDockerDriver, dockerConnection } from '../../src/domains/agents/drivers/docker/docker.driver.ts';
import { demultiplex } from '../../src/domains/agents/drivers/docker/docker-observe.service.ts';
import type { AgentDeploySpec } from '../../src/domains/agents/drivers/driver.contract.ts';

const host = process.env.DOCKER_TEST_HOST;
const image = process.env.DOCKER_TEST_IMAGE;
const agentId = `engine-test-${process.pid}`;

const spec = (over: Partial<AgentDeploySpec> = {}): AgentDeploySpec => ({
  agentId,
  userId: 'user-1',
  plan: 'solo',
  gatewayToken: 'e'.repeat(48),
  platformApiKey: 'scoped-key',
  backendUrl: 'https://backend.example',
  config: {},
  env: { DATABASE_URL: 'postgres://secret' },
  ...over,
});

describe.skipIf(!host || !image)('docker driver on a real engine', () => {
  const driver = host && image ? createDockerDriver({ dockerHost: host, image }) : undefined;
  const docker = host ? new Docker(dockerConnection(host).options) : undefined;
  afterAll(async () => {
    await driver?.delete(agentId);
  });

  /** Runs node inside the container and returns what it printed. */
  async function inContainer(script: string): Promise<string> {
    const container = (await docker!.listContainers({ all: true, filters: { label: [`agent-platform/agent-id=${agentId}`] } }))[0]!;
    const exec = await docker!.getContainer(container.Id).exec({ Cmd: ['node', '-e', script], AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({ hijack: true, stdin: false });
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    await new Promise((r) => stream.on('end', r));
    return demultiplex(Buffer.concat(chunks)).stdout;
  }

  it('runs the agent confined, reachable on its published port, through the whole lifecycle', async () => {
    const deployment = await driver!.deploy(spec());
    expect(await waitForHealthy(deployment.url, { timeoutMs: 30_000, intervalMs: 250 })).toBe(true);
    expect((await containerHealth(driver!, agentId)).status).toBe('healthy');
    expect(await driver!.deploy(spec())).toMatchObject({ externalId: deployment.externalId });

    const seen = JSON.parse(
      await inContainer(
        `const fs=require('fs');let ro;try{fs.writeFileSync('/probe','x')}catch(e){ro=e.code}fs.writeFileSync('/home/node/probe','x');` +
          `const st=fs.readFileSync('/proc/self/status','utf8');console.log(JSON.stringify({uid:process.getuid(),ro,` +
          `capEff:/CapEff:\\s*(\\w+)/.exec(st)[1],capBnd:/CapBnd:\\s*(\\w+)/.exec(st)[1],nnp:/NoNewPrivs:\\s*(\\d)/.exec(st)[1],db:process.env.DATABASE_URL??null,token:process.env.AGENT_GATEWAY_TOKEN}))`,
      ),
    ) as Record<string, unknown>;
    expect(seen).toEqual({
      uid: 1000,
      ro: 'EROFS',
      capEff: '0000000000000000',
      capBnd: '0000000000000000',
      nnp: '1',
      db: null,
      token: 'e'.repeat(48),
    });

    const stats = await driver!.stats(agentId);
    expect(stats.memory).toBeGreaterThan(0);
    expect(stats.pids).toBeGreaterThan(0);
    expect(stats.memoryPercent).toBeGreaterThan(0);
    expect((await driver!.logs(agentId, { limit: 50 })).length).toBeGreaterThan(0);

    await driver!.suspend(agentId); // scale to zero: the container stops
    expect((await driver!.status(agentId)).status).toBe('stopped');
    await driver!.restart(agentId);
    await driver!.stop!(agentId);
    expect((await driver!.status(agentId)).status).toBe('stopped');
    await driver!.resume(agentId);
    const url = (await driver!.status(agentId)).url!;
    expect(await waitForHealthy(url, { timeoutMs: 30_000, intervalMs: 250 })).toBe(true);

    const replaced = await driver!.deploy(spec({ plan: 'collective' }));
    expect(replaced.externalId).not.toBe(deployment.externalId);
    const info = await docker!.getContainer(replaced.externalId).inspect();
    expect(info.HostConfig).toMatchObject({ Memory: 4096 * 1024 * 1024, NanoCpus: 2e9, PidsLimit: 512, ReadonlyRootfs: true });

    await driver!.delete(agentId);
    expect(await driver!.status(agentId)).toEqual({ status: 'not_found' });
  }, 120_000);
});
