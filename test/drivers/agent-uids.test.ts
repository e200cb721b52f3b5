/**
 * Agent uids are the operator's to place (docs/agents.md "Agent uids"): with
 * AGENT_UID_BASE a new agent runs as base + the number its database gave it, so two platforms on one
 * host can keep their tenants' agents on different uids; the setting is checked at start-up; and a
 * platform whose range another platform on the host uses (registered, or only seen running agents)
 * says so in one line naming that pid and the setting. Agents have uids of their own only when the
 * platform runs as root in the sandbox: the parts that need it are skipped elsewhere, with the reason.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.ts';
import { LIMITS } from '../../src/config/limits.ts';
import { agentUid, claimUidRange } from '../../src/domains/agents/drivers/local/containment/agent-uids.service.ts';
import { processUid } from '../../src/domains/agents/drivers/local/containment/proc.service.ts';
import { detectSandbox, FIRST_AGENT_UID } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { createLocalDriver } from '../../src/domains/agents/drivers/local/local.driver.ts';
import type { AgentState } from '../../src/domains/agents/drivers/local/local-state.service.ts';
import { eventually } from '../agents/helpers.ts';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';
import { signUp } from '../helpers/platform.ts';

const sandbox = detectSandbox('auto');
if (!sandbox.separateUser)
  console.warn('test/drivers/agent-uids.test.ts: agents have no uid of their own here (needs root and bubblewrap)');

const scratch = mkdtempSync(join(tmpdir(), 'agent-uids-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});
let n = 0;
const fresh = (name: string) => {
  const dir = join(scratch, `${name}-${n++}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

/** The levels of the `agent uids` lines a local driver logs at start-up; it is shut down again (its range released). */
async function uidLevels(o: { dataDir: string; uidBase: number; registry: string }) {
  const { driver, uidLines } = startUpLines(o);
  await driver.shutdown();
  return uidLines.map(([level]) => level);
}

/** The lines a local driver logs when it is made with these options. */
function startUpLines(o: { dataDir: string; uidBase: number; registry: string }) {
  const lines: [string, string][] = [];
  const driver = createLocalDriver({
    dataDir: o.dataDir,
    runtime: 'builtin',
    sandbox: 'auto',
    uidBase: o.uidBase,
    uidRegistryDir: o.registry,
    log: (level, message) => lines.push([level, message]),
  });
  return { driver, lines, uidLines: lines.filter(([, m]) => m.startsWith('agent uids')) };
}

/** A process that stays until killed, started with `cmd`; resolves once it printed `ready` (or at once). */
async function startChild(cmd: string, args: string[], waitReady: boolean): Promise<ChildProcess> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  if (waitReady)
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
      child.once('exit', (code) => reject(new Error(`exited ${code}`)));
    });
  return child;
}

describe('AGENT_UID_BASE: the setting', () => {
  it('is checked at start-up: at least 100000, and its range below 2^31', () => {
    const base = (v: string) => loadConfig({ AGENT_UID_BASE: v }, { readDotEnv: false }).AGENT_UID_BASE;
    expect(loadConfig({}, { readDotEnv: false }).AGENT_UID_BASE).toBe(FIRST_AGENT_UID);
    expect(base('1200000000')).toBe(1_200_000_000);
    expect(() => base('99999')).toThrow(/^Invalid configuration: AGENT_UID_BASE must be at least 100000/);
    expect(() => base(String(2 ** 31 - LIMITS.agentUidRange))).toThrow(/AGENT_UID_BASE must be at most .* below 2\^31/);
    expect(base(String(2 ** 31 - 1 - LIMITS.agentUidRange))).toBe(2 ** 31 - 1 - LIMITS.agentUidRange);
    expect(() => base('1e9x')).toThrow(/AGENT_UID_BASE must be a whole number/);
  });

  it('places the database number at the base; a number beyond the range has no uid', () => {
    expect(agentUid(FIRST_AGENT_UID, FIRST_AGENT_UID + 3)).toBe(FIRST_AGENT_UID + 3);
    expect(agentUid(300_000, FIRST_AGENT_UID + 3)).toBe(300_003);
    expect(() => agentUid(300_000, FIRST_AGENT_UID + LIMITS.agentUidRange)).toThrow(/AGENT_UID_BASE=300000/);
  });
});

describe.skipIf(!sandbox.separateUser)('AGENT_UID_BASE through the API', () => {
  let live: LivePlatform;
  afterAll(async () => {
    await live?.close();
  });

  it('a new agent runs as AGENT_UID_BASE + the number its database allocated', async () => {
    const base = 1_200_000_000;
    live = await startLivePlatform({ AGENT_UID_BASE: String(base) });
    const { web } = live.running()!;
    const user = await signUp(web);
    const prov = await web.inject({
      method: 'POST',
      url: '/api/agents/provision',
      headers: { cookie: user.cookie },
      payload: { name: 'Placed' },
    });
    expect(prov.statusCode).toBe(201);
    const agentId = prov.json().agent.id as string;
    const state = await eventually(async () => {
      try {
        return JSON.parse(readFileSync(join(live.config.DATA_DIR, 'agents', agentId, 'driver-state.json'), 'utf8')) as AgentState;
      } catch {
        return undefined;
      }
    }, 20_000);
    const { sandbox_uid } = await live.database.db.kysely
      .selectFrom('agents')
      .select('sandbox_uid')
      .where('id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(sandbox_uid).toBeGreaterThanOrEqual(FIRST_AGENT_UID);
    const uid = base + (sandbox_uid - FIRST_AGENT_UID);
    expect(state.uid).toBe(uid);
    // the agent's runtime itself runs as it, not as the database's number
    expect(processUid(state.pid)).toBe(uid);
    expect(processUid(state.pid)).not.toBe(sandbox_uid);
  }, 60_000);
});

describe.skipIf(!sandbox.separateUser)('another platform on the host in the same uid range', () => {
  const holder = fileURLToPath(new URL('../fixtures/uid-range-holder.ts', import.meta.url));

  it('a second platform registered with an overlapping range: one warning naming its pid and AGENT_UID_BASE', async () => {
    const registry = fresh('registry');
    const otherDataDir = fresh('other-platform');
    const other = await startChild(process.execPath, [holder, '1300000000', otherDataDir, registry], true);

    const { uidLines, driver } = startUpLines({ dataDir: fresh('this-platform'), uidBase: 1_300_000_000, registry });
    expect(uidLines.filter(([level]) => level === 'warn')).toEqual([
      [
        'warn',
        expect.stringMatching(
          new RegExp(
            `^agent uids 1300000000–1309999999 overlap those of another platform on this host \\(pid ${other.pid}, DATA_DIR ${otherDataDir}, .*give one of them another AGENT_UID_BASE$`,
          ),
        ),
      ],
    ]);
    // its range is registered for the next platform to see, and released at shutdown
    expect(readdirSync(registry)).toHaveLength(2);
    await driver.shutdown();
    expect(readdirSync(registry)).toHaveLength(1);

    // a range that only touches the other one, or another process of this same platform: no warning
    expect(await uidLevels({ dataDir: fresh('next-range'), uidBase: 1_310_000_000, registry })).toEqual(['info']);
    expect(await uidLevels({ dataDir: fresh('below'), uidBase: 1_290_000_000, registry })).toEqual(['info']);
    expect(await uidLevels({ dataDir: otherDataDir, uidBase: 1_300_000_000, registry })).toEqual(['info']);

    // once the other platform is gone, its entry is dropped and the range is free
    other.kill('SIGKILL');
    await new Promise((r) => other.once('exit', r));
    expect(await uidLevels({ dataDir: fresh('after'), uidBase: 1_300_000_000, registry })).toEqual(['info']);
    expect(readdirSync(registry).some((f) => f.startsWith(`${other.pid}-`))).toBe(false);
  }, 30_000);

  it("a process of the range that is none of this platform's agents (a platform that does not register): one warning naming it", async () => {
    const registry = fresh('registry');
    const uid = 1_400_000_007;
    const stranger = await startChild('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'sleep', '60'], false);
    await eventually(async () => processUid(stranger.pid!) === uid, 5_000);

    const dataDir = fresh('this-platform');
    const { uidLines } = startUpLines({ dataDir, uidBase: 1_400_000_000, registry });
    expect(uidLines.filter(([level]) => level === 'warn')).toEqual([
      [
        'warn',
        expect.stringMatching(
          new RegExp(
            `^agent uids 1400000000–1409999999: process ${stranger.pid} runs as uid ${uid} of this range and is none of this platform's agents .*AGENT_UID_BASE$`,
          ),
        ),
      ],
    ]);

    // the same process as one of this platform's own agents (its state file names the uid): no warning
    mkdirSync(join(dataDir, 'agents', 'mine'), { recursive: true });
    writeFileSync(join(dataDir, 'agents', 'mine', 'driver-state.json'), JSON.stringify({ agentId: 'mine', pid: stranger.pid, uid }));
    expect(await uidLevels({ dataDir, uidBase: 1_400_000_000, registry })).toEqual(['info']);
  }, 30_000);

  it('a registry folder others may write is not trusted', () => {
    const registry = fresh('open-registry');
    writeFileSync(
      join(registry, '1-fake.json'),
      JSON.stringify({ pid: process.pid, startTicks: 0, base: 1_500_000_000, end: 1_510_000_000, dataDir: '/x' }),
    );
    chmodSync(registry, 0o777);
    const { lines } = claimUidRange({ base: 1_500_000_000, dataDir: fresh('p'), registryDir: registry, ownUids: new Set() });
    expect(lines.filter((l) => l.level === 'warn').map((l) => l.message)).toEqual([
      expect.stringMatching(/belongs to another user or others may write it/),
    ]);
  });
});
