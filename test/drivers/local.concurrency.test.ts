/**
 * The local driver under interleaved lifecycle calls (real child processes): whatever the order in
 * which deploy, restart, suspend, resume and delete arrive for one agent, at most one runtime
 * process of that agent is alive, and delete leaves none — counted the way an operator would, by
 * the AGENT_ID in each process's environment (/proc/<pid>/environ), not by the driver's own state.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDeploySpec, HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import { createHostingDriver, type DriverConfig } from '../../src/domains/agents/drivers/driver-registry.service.ts';
import { FIRST_AGENT_UID } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { localDriverConfig } from './local-config.ts';

let dataDir: string;
let driver: HostingDriver;
const config = (): DriverConfig => localDriverConfig(dataDir);

const spec = (agentId: string, token: string, config: Record<string, unknown> = {}): AgentDeploySpec => ({
  agentId,
  userId: 'user-1',
  plan: 'solo',
  gatewayToken: token,
  platformApiKey: 'k',
  backendUrl: 'http://127.0.0.1:9',
  config,
  sandboxUid: uidOf(agentId),
});
/** one uid per agent id, as the database allocates them (migration 090) */
const uids = new Map<string, number>();
function uidOf(agentId: string): number {
  if (!uids.has(agentId)) uids.set(agentId, FIRST_AGENT_UID + 100 + uids.size);
  return uids.get(agentId)!;
}

/** Live (non-zombie) runtime processes whose environment names `agentId` in this test's DATA_DIR; the sandbox wrapper (bwrap) is not a runtime. */
function processesOf(agentId: string): number[] {
  const workspace = join(dataDir, 'agents', agentId, 'workspace');
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const env = readFileSync(`/proc/${name}/environ`, 'utf8').split('\0');
      if (!env.includes(`AGENT_ID=${agentId}`) || !env.includes(`AGENT_WORKSPACE=${workspace}`)) continue;
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      const comm = readFileSync(`/proc/${name}/comm`, 'utf8').trim();
      if (state !== 'Z' && comm !== 'bwrap') out.push(Number(name));
    } catch {
      /* gone meanwhile, or not ours to read */
    }
  }
  return out;
}

beforeAll(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'local-conc-'));
  driver = createHostingDriver(config(), { stopGraceMs: 2_000 });
});

afterAll(async () => {
  await driver?.shutdown();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('local driver: one process per agent whatever the interleaving', () => {
  it('concurrent deploy/restart/suspend/resume leave exactly one process; delete leaves none', async () => {
    const id = 'agent-conc';
    const t1 = 'x'.repeat(48);
    const t2 = 'y'.repeat(48);
    const first = await Promise.allSettled([
      driver.deploy(spec(id, t1)),
      driver.deploy(spec(id, t2)),
      driver.restart(id),
      driver.deploy(spec(id, t1, { tone: 'dry' })),
      driver.suspend(id),
      driver.resume(id),
      driver.restart(id),
      driver.deploy(spec(id, t2, { tone: 'warm' })),
      driver.restart(id),
    ]);
    expect(first.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
    expect(processesOf(id)).toHaveLength(1);
    // delete racing more starts: the calls run in arrival order, so the last deploy wins and one lives
    await Promise.allSettled([driver.restart(id), driver.delete(id), driver.deploy(spec(id, t1))]);
    expect(processesOf(id)).toHaveLength(1);
    await Promise.allSettled([driver.deploy(spec(id, t2)), driver.restart(id), driver.delete(id)]);
    expect(processesOf(id)).toEqual([]);
    expect(await driver.status(id)).toEqual({ status: 'not_found' });
  });

  it('shutdown stops only what this instance started, not the process another instance started since', async () => {
    const id = 'agent-handed-over';
    const other = createHostingDriver(config(), { stopGraceMs: 2_000 });
    const first = createHostingDriver(config(), { stopGraceMs: 2_000 });
    try {
      await first.deploy(spec(id, 'f'.repeat(48)));
      await other.deploy(spec(id, 'g'.repeat(48))); // replaces first's process: the agent is other's now
      const [pid] = processesOf(id);
      expect(pid).toBeDefined();
      await first.shutdown();
      expect(processesOf(id)).toEqual([pid]);
      expect((await other.status(id)).status).toMatch(/healthy|running/);
    } finally {
      await other.delete(id);
    }
  });

  it('delete also stops a process of the agent that another platform process started on the same DATA_DIR', async () => {
    const id = 'agent-twice';
    const other = createHostingDriver(config(), { stopGraceMs: 2_000 });
    try {
      // two backends deploying one agent at once: neither knows of the other's process
      // (each replaces the other's process and network as it starts, so one of them may fail: the
      // deployment jobs' lease keeps this from happening through the API)
      const started = await Promise.allSettled([driver.deploy(spec(id, 'p'.repeat(48))), other.deploy(spec(id, 'q'.repeat(48)))]);
      expect(started.some((r) => r.status === 'fulfilled')).toBe(true);
      expect(processesOf(id).length).toBeGreaterThanOrEqual(1);
      await driver.delete(id);
      expect(processesOf(id)).toEqual([]);
    } finally {
      await other.shutdown();
    }
  });
});
