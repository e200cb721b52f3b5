/**
 * The local driver fails closed without a sandbox (docs/agents.md "Sandbox").
 * On a machine where bubblewrap cannot build one (here a `bwrap` that fails as it does in a container
 * under Docker's default seccomp profile, test/fixtures/broken-bwrap.ts), AGENT_SANDBOX=auto starts,
 * says in one line that agents are refused and how to change that, and refuses every agent with 503
 * AGENT_SANDBOX_NOT_CONFIGURED naming AGENT_SANDBOX=off, through the driver and through the backend
 * API; an agent an earlier platform left running unsandboxed is stopped, not adopted. Only an
 * explicit AGENT_SANDBOX=off runs agents unsandboxed, and start-up says once what that means.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForHealthy } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import type { AgentDeploySpec, HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import { createHostingDriver } from '../../src/domains/agents/drivers/driver-registry.service.ts';
import { isAlive } from '../../src/domains/agents/drivers/local/containment/proc.service.ts';
import type { AgentState } from '../../src/domains/agents/drivers/local/local-state.service.ts';
import { AppError } from '../../src/lib/errors.ts';
import { eventually } from '../agents/helpers.ts';
import { brokenBwrapDir, pathWithBrokenBwrap } from '../fixtures/broken-bwrap.ts';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';
import { signUp } from '../helpers/platform.ts';
import { localDriverConfig } from './local-config.ts';

// before anything probes the sandbox (the probe runs once per process, when the first driver is made)
const fakeBin = brokenBwrapDir();
process.env.PATH = pathWithBrokenBwrap(fakeBin);

const dataDir = mkdtempSync(join(tmpdir(), 'sandbox-refusal-'));
const drivers: HostingDriver[] = [];
afterAll(async () => {
  await Promise.all(drivers.map((d) => d.shutdown()));
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(fakeBin, { recursive: true, force: true });
});

const spec = (agentId: string): AgentDeploySpec => ({
  agentId,
  userId: 'user-1',
  plan: 'solo',
  gatewayToken: 't'.repeat(48),
  platformApiKey: 'k',
  backendUrl: 'http://127.0.0.1:9',
  config: {},
  sandboxUid: 1_000_000_123,
});

function driverWith(sandbox: 'auto' | 'off') {
  const lines: [string, string][] = [];
  const driver = createHostingDriver(localDriverConfig(dataDir, { AGENT_SANDBOX: sandbox }), {
    log: (level, message) => lines.push([level, message]),
    stopGraceMs: 1_000,
  });
  drivers.push(driver);
  return { driver, lines };
}

const stateOf = (agentId: string): AgentState | undefined => {
  const file = join(dataDir, 'agents', agentId, 'driver-state.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as AgentState) : undefined;
};

/** The refusal every agent gets: a catalogue 503 whose sentence names AGENT_SANDBOX=off and what it means. */
const expectRefused = async (call: Promise<unknown>) => {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  const e = err as AppError;
  expect([e.id, e.status, e.code]).toEqual(['AGENT_SANDBOX_NOT_CONFIGURED', 503, 'AGENT_SANDBOX_NOT_CONFIGURED']);
  expect(e.message).toMatch(/no working agent sandbox/);
  expect(e.message).toMatch(/set AGENT_SANDBOX=off to run agents unsandboxed, as the platform's own OS user, able to read its environment/);
};

describe('AGENT_SANDBOX=auto where bubblewrap cannot build a sandbox', () => {
  it('start-up says in one line that agents are refused and how to change it', () => {
    const { lines } = driverWith('auto');
    expect(lines).toEqual([['warn', expect.stringContaining('agent sandbox unavailable (bwrap cannot create a sandbox here')]]);
    expect(lines[0]![1]).toMatch(/agents are refused; .* or set AGENT_SANDBOX=off to run agents unsandboxed$/);
  });

  it('deploy, restart and resume refuse with 503 AGENT_SANDBOX_NOT_CONFIGURED; nothing is started', async () => {
    const { driver } = driverWith('auto');
    await expectRefused(driver.deploy(spec('never-started')));
    await expectRefused(driver.restart('never-started'));
    await expectRefused(driver.resume('never-started'));
    expect(stateOf('never-started')).toBeUndefined();
    expect((await driver.status('never-started')).status).toBe('not_found');
  });

  it('an agent an earlier platform runs unsandboxed (AGENT_SANDBOX=off) is stopped, not adopted', async () => {
    const earlier = driverWith('off').driver;
    const deployed = await earlier.deploy(spec('left-running'));
    expect(await waitForHealthy(deployed.url, { timeoutMs: 20_000, intervalMs: 100 })).toBe(true);
    const pid = stateOf('left-running')!.pid;
    expect(isAlive(pid)).toBe(true);

    const { driver } = driverWith('auto');
    // the same spec: the process answers and would be adopted by a platform that may run it
    await expectRefused(driver.deploy(spec('left-running')));
    expect(isAlive(pid)).toBe(false);
    await expectRefused(driver.restart('left-running'));
    expect((await driver.status('left-running')).status).not.toMatch(/healthy|running|starting/);
  }, 40_000);
});

describe('AGENT_SANDBOX=off', () => {
  it('start-up says once what it means; agents then run, unsandboxed', async () => {
    const { driver, lines } = driverWith('off');
    const said = lines.filter(([, m]) => m.startsWith('AGENT_SANDBOX=off'));
    expect(said).toEqual([['warn', expect.stringContaining("agents run unsandboxed as this process's user and can read its environment")]]);
    expect(said[0]![1]).toMatch(/only for trusted agents$/);
    const deployed = await driver.deploy(spec('trusted'));
    expect(await waitForHealthy(deployed.url, { timeoutMs: 20_000, intervalMs: 100 })).toBe(true);
    // unsandboxed, the agent is this process's user: no uid of its own is recorded or used
    expect(stateOf('trusted')?.uid).toBeUndefined();
  }, 30_000);
});

describe('through the API (AGENT_SANDBOX=auto, the default)', () => {
  let live: LivePlatform;
  beforeAll(async () => {
    live = await startLivePlatform({ AGENT_SANDBOX: 'auto' });
  }, 120_000);
  afterAll(async () => {
    await live?.close();
  });

  it("a provisioned agent's deployment fails with the sentence naming AGENT_SANDBOX=off; no process, no folder", async () => {
    const { web, backend } = live.running()!;
    const user = await signUp(web);
    const prov = await web.inject({
      method: 'POST',
      url: '/api/agents/provision',
      headers: { cookie: user.cookie },
      payload: { name: 'Refused' },
    });
    expect(prov.statusCode).toBe(201);
    const agentId = prov.json().agent.id as string;
    const job = await live.database.db.kysely
      .selectFrom('deployments')
      .select('id')
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    const headers = { authorization: `Bearer ${live.config.INTERNAL_API_KEY}`, 'x-user-id': user.id };
    const failed = await eventually(async () => {
      const r = (await backend.inject({ method: 'GET', url: `/api/deployments/${job.id}`, headers })).json();
      return r.lastError ? r : undefined;
    }, 15_000);
    expect(failed.lastError).toMatch(/no working agent sandbox.*set AGENT_SANDBOX=off to run agents unsandboxed/);
    expect(existsSync(join(live.config.DATA_DIR, 'agents', agentId, 'driver-state.json'))).toBe(false);
    // provisioning while the job retries, then error (§3): never running
    expect(['provisioning', 'error']).toContain(
      (await backend.inject({ method: 'GET', url: `/api/agents/${agentId}`, headers })).json().status,
    );
  }, 30_000);
});
