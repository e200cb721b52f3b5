/**
 * The local driver's sandbox (docs/agents.md "Sandbox", docs/architecture.md rule 9), proved from inside a running
 * agent: it cannot read DATA_DIR/secrets.json, a PostgreSQL data directory in DATA_DIR, another
 * agent's workspace, /etc/shadow or the platform's environment; it runs as its own uid and still
 * reaches its model provider over loopback. Skipped, with the reason, where bwrap cannot sandbox.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForHealthy } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import { planResources } from '../../src/domains/agents/drivers/agent-env.rules.ts';
import type { AgentDeploySpec, HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import { createHostingDriver } from '../../src/domains/agents/drivers/driver-registry.service.ts';
import { detectCgroups } from '../../src/domains/agents/drivers/local/containment/agent-cgroup.service.ts';
import { detectNetwork } from '../../src/domains/agents/drivers/local/containment/agent-network.service.ts';
import { processesOfUid } from '../../src/domains/agents/drivers/local/containment/proc.service.ts';
import { detectSandbox, FIRST_AGENT_UID } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { localDriverConfig } from './local-config.ts';

const report = detectSandbox('auto');
if (!report.active) console.warn(`test/drivers/sandbox.test.ts skipped: ${report.lines.join('; ')}`);
const net = detectNetwork('internet', report.active);
if (report.active && !net.isolated) console.warn(`test/drivers/sandbox.test.ts: network isolation not tested: ${net.lines.join('; ')}`);
const limits = report.separateUser ? detectCgroups().cgroups : undefined;
if (report.active && !limits) console.warn('test/drivers/sandbox.test.ts: memory/CPU limits per plan not tested (no usable cgroups)');
/** uids as the database allocates them (migration 090) */
const UIDS: Record<string, number> = { 'agent-a': FIRST_AGENT_UID + 901, 'agent-other': FIRST_AGENT_UID + 902 };
/** a service on the host's loopback that no agent may reach (stands for PostgreSQL, Redis, the web app) */
let hostService: Server;
let hostServicePort: number;

let dataDir: string;
let driver: HostingDriver;
let upstream: FakeOpenAi;
let urlA: string;
const tokenA = 's'.repeat(48);

const spec = (agentId: string, token: string, env: Record<string, string> = {}): AgentDeploySpec => ({
  agentId,
  userId: 'user-1',
  plan: 'solo',
  gatewayToken: token,
  platformApiKey: 'k',
  backendUrl: 'http://127.0.0.1:9',
  config: {},
  env,
  sandboxUid: UIDS[agentId]!,
});

describe.skipIf(!report.active)('sandboxed local agents (bubblewrap)', () => {
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'sandbox-'));
    // what a platform keeps in DATA_DIR: its generated keys and the embedded PostgreSQL data
    writeFileSync(join(dataDir, 'secrets.json'), JSON.stringify({ secretsEncryptionKey: 'top-secret' }), { mode: 0o600 });
    mkdirSync(join(dataDir, 'pg'), { recursive: true });
    writeFileSync(join(dataDir, 'pg', 'PG_VERSION'), '18\n');
    upstream = await startFakeOpenAi({ apiKey: 'model-key' });
    hostService = createServer((s) => s.end('host-only\n'));
    await new Promise<void>((r) => hostService.listen(0, '127.0.0.1', r));
    hostServicePort = (hostService.address() as { port: number }).port;
    const other = join(dataDir, 'agents', 'agent-other', 'workspace');
    driver = createHostingDriver(localDriverConfig(dataDir, { AGENT_SANDBOX: 'auto' }), {
      stopGraceMs: 2_000,
      runtimeEntry: fileURLToPath(new URL('../fixtures/sandbox-probe.ts', import.meta.url)),
      extraEnv: {
        PROBE_MAIN: fileURLToPath(new URL('../../src/runtime/main.ts', import.meta.url)),
        PROBE_PLATFORM_PID: String(process.pid),
        PROBE_TCP: JSON.stringify([hostServicePort]),
        PROBE_PATHS: JSON.stringify([
          join(dataDir, 'secrets.json'),
          join(dataDir, 'pg'),
          join(dataDir, 'pg', 'PG_VERSION'),
          join(other, 'notes.txt'),
          other,
          '/etc/shadow',
          '/etc/passwd',
        ]),
      },
    });
    await driver.deploy(spec('agent-other', 'o'.repeat(48)));
    writeFileSync(join(other, 'notes.txt'), 'the other tenant’s data');
    const a = await driver.deploy(
      spec('agent-a', tokenA, { AGENT_MODEL_BASE_URL: upstream.baseUrl, AGENT_MODEL_API_KEY: 'model-key', AGENT_MODEL: 'm' }),
    );
    urlA = a.url;
    expect(await waitForHealthy(urlA, { timeoutMs: 20_000, intervalMs: 100 })).toBe(true);
  });

  afterAll(async () => {
    await driver?.shutdown();
    await upstream?.close();
    hostService?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const probe = () => JSON.parse(readFileSync(join(dataDir, 'agents', 'agent-a', 'workspace', 'probe.json'), 'utf8'));

  it("cannot read DATA_DIR/secrets.json, the PostgreSQL data directory, another agent's workspace or /etc/shadow", () => {
    const { paths } = probe();
    for (const [path, outcome] of Object.entries(paths))
      expect([path, outcome]).toEqual([path, expect.stringMatching(/^(ENOENT|EACCES)$/)]);
  });

  it("runs as its own unprivileged user and cannot see the platform's process or environment", () => {
    const p = probe();
    expect(p.platformEnviron).toMatch(/^(ENOENT|EACCES)$/);
    if (report.separateUser) {
      // the uid the database allocated (docs/security.md N16: never derived from the id, so never shared)
      expect(p.uid).toBe(UIDS['agent-a']);
      expect(p.uid).not.toBe(0);
    }
    // its own PID namespace: the sandbox's init and the runtime, not the machine's processes
    expect(p.visibleProcesses).toBeLessThan(10);
  });

  it.skipIf(!net.isolated)("cannot reach the host's loopback services (docs/security.md N8): its own network namespace", () => {
    const { tcp } = probe();
    expect(tcp[String(hostServicePort)]).toMatch(/^(ECONNREFUSED|ENETUNREACH|EHOSTUNREACH|timeout)$/);
  });

  it.skipIf(!net.bridge)(
    'cannot plant a file or a link, or move a socket, in the folder of its platform sockets (agent-loopback.service.ts)',
    () => {
      const { platformSockets } = probe() as { platformSockets?: string[] };
      // file, link, and the socket of its model provider's port moved away
      expect(platformSockets).toHaveLength(3);
      for (const outcome of platformSockets!) expect(outcome).toMatch(/^(EROFS|EACCES|EPERM)$/);
      expect(readdirSync(join(dataDir, 'agents', 'agent-a', 'loopback')).sort()).not.toContain('planted');
    },
  );

  it('never reads or creates a file where the agent planted a link (docs/security.md N2, N3): logs, stats and a relaunch', async () => {
    const ws = join(dataDir, 'agents', 'agent-a', 'workspace');
    // a platform file the agent cannot see, in the runtime's own line format (so a followed link would show)
    const secret = join(dataDir, 'platform-private.log');
    writeFileSync(secret, `${JSON.stringify({ level: 30, time: 0, msg: 'top-secret', messagesProcessed: 'top-secret' })}\n`, {
      mode: 0o600,
    });
    const target = join(dataDir, 'created-by-root.log');
    // what a hostile agent does in its own workspace: its log and counters become links to the
    // platform's secrets, and a link waits where the platform used to open process.log on every launch
    renameSync(join(ws, 'logs', 'runtime.log'), join(ws, 'logs', 'runtime.log.old'));
    symlinkSync(secret, join(ws, 'logs', 'runtime.log'));
    rmSync(join(ws, 'logs', 'stats.json'), { force: true });
    symlinkSync(secret, join(ws, 'logs', 'stats.json'));
    symlinkSync(target, join(ws, 'logs', 'process.log'));
    const logs = await driver.logs('agent-a', { limit: 100 });
    expect(JSON.stringify(logs)).not.toContain('top-secret');
    expect(JSON.stringify(await driver.stats('agent-a'))).not.toContain('top-secret');
    // (the runtime itself would trip over its own planted links: only the process.log one stays)
    rmSync(join(ws, 'logs', 'runtime.log'));
    rmSync(join(ws, 'logs', 'stats.json'));
    await driver.restart('agent-a');
    expect(existsSync(target)).toBe(false);
    expect(await waitForHealthy(urlA, { timeoutMs: 20_000, intervalMs: 100 })).toBe(true);
    // the process's own output is in the platform's folder, outside what the agent sees
    expect(existsSync(join(dataDir, 'agents', 'agent-a', 'logs', 'process.log'))).toBe(true);
  });

  it.skipIf(!limits)("runs in a cgroup of its own with its plan's memory (§4.7): every process of the agent", () => {
    const pids = processesOfUid(UIDS['agent-a']!);
    expect(pids.length).toBeGreaterThan(0);
    for (const pid of pids) expect(readFileSync(`/proc/${pid}/cgroup`, 'utf8')).toMatch(/agent-platform\/agent-a\n/);
    const memory =
      limits!.version === 1
        ? '/sys/fs/cgroup/memory/agent-platform/agent-a/memory.limit_in_bytes'
        : '/sys/fs/cgroup/agent-platform/agent-a/memory.max';
    expect(Number(readFileSync(memory, 'utf8'))).toBe(planResources('solo').memoryMb * 1024 * 1024);
  });

  it('still serves its gateway and reaches its model provider over loopback', async () => {
    const res = await fetch(`${urlA}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokenA}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'inside' }] }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe('Echo: inside');
  });
});
