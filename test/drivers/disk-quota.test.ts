/**
 * Each local agent's disk (docs/agents.md "Disk", docs/security.md "Disk"), proved from inside running
 * sandboxed agents: a file written past the quota stops at it with EFBIG (RLIMIT_FSIZE from the
 * launch); a workspace measured over its quota leaves the agent's processes unable to grow any file
 * and the file explorer refusing writes that add, until it is back under; process.log stays near its
 * rotation size while the agent writes megabytes to its stdout. Skipped, with the reason, where
 * bwrap cannot sandbox or util-linux's prlimit is missing.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.ts';
import { waitForHealthy } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import type { AgentDeploySpec, HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import { diskQuotaBytes, findPrlimit } from '../../src/domains/agents/drivers/local/containment/agent-disk.service.ts';
import { processesOfUid } from '../../src/domains/agents/drivers/local/containment/proc.service.ts';
import { detectSandbox, FIRST_AGENT_UID } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { createLocalDriver } from '../../src/domains/agents/drivers/local/local.driver.ts';
import { createWorkspaceFiles } from '../../src/domains/files/workspace-files.service.ts';
import { eventually } from '../agents/helpers.ts';

const report = detectSandbox('auto');
const prlimit = findPrlimit();
const skip = !report.active || !report.separateUser || !prlimit;
if (skip)
  console.warn(
    `test/drivers/disk-quota.test.ts skipped: ${!prlimit ? 'prlimit (util-linux) not found' : !report.separateUser ? 'agents need a uid of their own (root)' : report.lines.join('; ')}`,
  );

const MiB = 1024 * 1024;
const QUOTA_MB = 16;
const LOG_MAX = 128 * 1024;
const UIDS: Record<string, number> = { 'agent-disk': FIRST_AGENT_UID + 911, 'agent-log': FIRST_AGENT_UID + 912 };

let dataDir: string;
let driver: HostingDriver;
const spec = (agentId: string, env: Record<string, string>): AgentDeploySpec => ({
  agentId,
  userId: 'user-1',
  plan: 'solo',
  gatewayToken: agentId.padEnd(48, 't'),
  platformApiKey: 'k',
  backendUrl: 'http://127.0.0.1:9',
  config: {},
  env,
  sandboxUid: UIDS[agentId]!,
});
const ws = (agentId: string) => join(dataDir, 'agents', agentId, 'workspace');
const fsizeOf = (pid: number) => /^Max file size\s+(\S+)\s+(\S+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'))?.slice(1);
const usage = (agentId: string) => JSON.parse(readFileSync(join(dataDir, 'agents', agentId, 'disk-usage.json'), 'utf8'));

describe('AGENT_DISK_QUOTA_MB', () => {
  it('replaces the per-plan quota; unset, the plan decides (solo: 1 GB, network: 8 GB)', () => {
    const base = { DATA_DIR: '/nonexistent', INTERNAL_API_KEY: 'k' };
    expect(loadConfig({ ...base, AGENT_DISK_QUOTA_MB: '16' }, { readDotEnv: false }).AGENT_DISK_QUOTA_MB).toBe(16);
    expect(loadConfig(base, { readDotEnv: false }).AGENT_DISK_QUOTA_MB).toBeUndefined();
    expect(() => loadConfig({ ...base, AGENT_DISK_QUOTA_MB: '0' }, { readDotEnv: false })).toThrow(/AGENT_DISK_QUOTA_MB/);
    expect(diskQuotaBytes('solo', undefined)).toBe(1024 * MiB);
    expect(diskQuotaBytes('network', undefined)).toBe(8192 * MiB);
    expect(diskQuotaBytes('network', 16)).toBe(16 * MiB);
  });
});

describe.skipIf(skip)('sandboxed local agents: disk quota and process.log', () => {
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'disk-quota-'));
    driver = createLocalDriver({
      dataDir,
      sandbox: 'auto',
      stopGraceMs: 2_000,
      runtimeEntry: fileURLToPath(new URL('../fixtures/disk-probe.ts', import.meta.url)),
      extraEnv: { PROBE_MAIN: fileURLToPath(new URL('../../src/runtime/main.ts', import.meta.url)) },
      diskQuotaMb: QUOTA_MB,
      diskCheckIntervalMs: 200,
      processLogCheckIntervalMs: 50,
      processLogMaxBytes: LOG_MAX,
    });
    await driver.ready?.(); // starts the measures and the rotation, as the backend's start does
    const [a, b] = await Promise.all([
      driver.deploy(spec('agent-disk', { PROBE_WRITE_BYTES: String(QUOTA_MB * MiB + MiB) })),
      // 10 KB every 10 ms: about 1 MB a second to its stdout
      driver.deploy(spec('agent-log', { PROBE_STDOUT_BYTES_PER_10MS: String(10 * 1024) })),
    ]);
    for (const d of [a, b]) expect(await waitForHealthy(d.url, { timeoutMs: 20_000, intervalMs: 100 })).toBe(true);
  });

  afterAll(async () => {
    await driver?.shutdown();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('a file written past the quota stops at it: EFBIG (RLIMIT_FSIZE = the quota, on every process of the agent)', async () => {
    const file = join(ws('agent-disk'), 'disk-probe.json');
    await eventually(async () => existsSync(file), 10_000);
    const probe = JSON.parse(readFileSync(file, 'utf8'));
    expect(probe.outcome).toBe('EFBIG');
    expect(probe.size).toBe(QUOTA_MB * MiB);
    expect(probe.fsize).toEqual([String(QUOTA_MB * MiB), String(QUOTA_MB * MiB)]);
  });

  it('over its quota: its processes cannot grow a file, the explorer takes only writes that shrink; back under, both are given back', async () => {
    // the 16 MB file and the rest: over 16 MB, measured within a few checks
    await eventually(async () => usage('agent-disk').over === true, 10_000);
    expect(usage('agent-disk').usedBytes).toBeGreaterThan(QUOTA_MB * MiB);
    const pids = processesOfUid(UIDS['agent-disk']!);
    expect(pids.length).toBeGreaterThan(0);
    await eventually(async () => pids.every((pid) => fsizeOf(pid)?.join(':') === '0:0'), 5_000);
    // what runs as the agent for the explorer (its git) is limited the same way
    const fsizeInRun = async () =>
      /^Max file size\s+(\S+)/m.exec(
        await driver.workspace!('agent-disk').run!('/usr/bin/cat', ['/proc/self/limits'], {
          env: {},
          timeoutMs: 10_000,
          maxBuffer: 65_536,
        }),
      )?.[1];
    expect(await fsizeInRun()).toBe('0');
    // what the owner does through the explorer: a new file is refused, emptying the big one is not
    const files = createWorkspaceFiles(driver.workspace!('agent-disk'));
    await expect(files.write('new.txt', 'more')).rejects.toMatchObject({ status: 409, message: expect.stringMatching(/disk quota/) });
    expect(existsSync(join(ws('agent-disk'), 'new.txt'))).toBe(false);
    await expect(files.write('disk-probe.json', 'x'.repeat(10 * 1024))).rejects.toMatchObject({ status: 409 });
    expect(await files.write('big.bin', 'emptied')).toEqual({ ok: true, path: 'big.bin', size: 7 });
    await eventually(async () => usage('agent-disk').over === false, 10_000);
    // raised in place where the platform may (CAP_SYS_RESOURCE), else the agent is started again with it
    const quota = String(QUOTA_MB * MiB);
    await eventually(async () => {
      const now = processesOfUid(UIDS['agent-disk']!);
      return now.length > 0 && now.every((pid) => fsizeOf(pid)?.join(':') === `${quota}:${quota}`);
    }, 20_000);
    expect((await files.write('new.txt', 'more')).ok).toBe(true);
    expect(await fsizeInRun()).toBe(quota);
    // the crossing was written where the owner reads the agent's output
    expect(readFileSync(join(dataDir, 'agents', 'agent-disk', 'logs', 'process.log'), 'utf8')).toMatch(/\[platform\] .*disk quota/);
  });

  it('process.log stays near its rotation size while the agent writes megabytes to its stdout; process.log.1 keeps the newest part', async () => {
    const log = join(dataDir, 'agents', 'agent-log', 'logs', 'process.log');
    const written = () => Number(readFileSync(join(ws('agent-log'), 'stdout-written.txt'), 'utf8'));
    let largest = 0;
    const start = written();
    // about 3 s at 1 MB a second, sampled every 20 ms
    while (written() - start < 3 * MiB) {
      largest = Math.max(largest, statSync(log).size);
      await new Promise((r) => setTimeout(r, 20));
    }
    // rotated every 50 ms once over 128 KB: never more than a few checks' worth of output above it
    expect(largest).toBeLessThan(4 * LOG_MAX);
    expect(statSync(`${log}.1`).size).toBeLessThanOrEqual(LOG_MAX);
    expect(statSync(`${log}.1`).size).toBeGreaterThan(LOG_MAX / 2);
    // and all of it counts towards the agent's quota, which it is far under
    await eventually(async () => usage('agent-log').measuredAt > new Date(Date.now() - 1_000).toISOString(), 5_000);
    expect(usage('agent-log')).toMatchObject({ over: false, quotaBytes: QUOTA_MB * MiB });
  });
});
