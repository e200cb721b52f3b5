/**
 * Stopping and restarting `npm start` the way a self-hoster does (docs/configuration.md "Starting
 * and stopping"), with a real agent on the local driver:
 * - Ctrl-C in a terminal is SIGINT to the whole foreground process group; closing the terminal is
 *   SIGHUP to it; a service manager sends SIGTERM. Each, three times in a row over the same data:
 *   exit code 0, no stack trace, the agent's processes and the embedded PostgreSQL gone.
 * - after a restart the agent reads `running` only once it answers again;
 * - a platform killed with SIGKILL leaves its agents (and its PostgreSQL) running: the next start
 *   takes them over, and that platform's clean stop ends them;
 * - the log names only processes that exist (docs/agents.md "Start-up and shutdown"): a clean
 *   restart reads as one line, a killed platform's leftover as such.
 */
import { chmodSync, mkdtempSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { testAgentSandbox } from '../helpers/agent-sandbox.ts';
import {
  agentPids,
  buildScratchServer,
  eventually,
  isAlive,
  killLeftovers,
  postgresPid,
  processesOfUid,
  removeTree,
  type Started,
  startPlatform,
  TROUBLE,
  waitFor,
  webClient,
} from './helpers.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'platform-stop-'));
chmodSync(dataDir, 0o755); // the embedded server runs as the postgres OS user when we are root
const { main, out } = buildScratchServer('stop');
let upstream: FakeOpenAi | undefined;

afterAll(async () => {
  await killLeftovers([dataDir]);
  await upstream?.close();
  removeTree(dataDir);
  removeTree(out);
});

const ports = { web: 0, backend: 0 };
let env: Record<string, string> = {};
let api: ReturnType<typeof webClient>;
let agentId = '';

async function startAndWait(group = true): Promise<Started> {
  const p = startPlatform(main, [], env, { group });
  const health = await waitFor(`http://127.0.0.1:${ports.web}/api/health`).catch((err) => {
    throw new Error(`platform did not come up: ${err}\n${p.output()}`);
  });
  expect(health.status).toBe(200);
  return p;
}

type AgentState = { pid: number; uid?: number; url: string };
const agentState = (): AgentState => JSON.parse(readFileSync(join(dataDir, 'agents', agentId, 'driver-state.json'), 'utf8')) as AgentState;
const answers = (url: string) =>
  fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) }).then(
    (r) => r.ok,
    () => false,
  );

/** Polls the agent's status from the moment the web app answers: `running` must only ever be read while it answers. */
async function watchStatusUntilRunning(): Promise<string[]> {
  const seen: string[] = [];
  await eventually(
    async () => {
      const status = (await api('GET', `/api/agents/${agentId}`)).body.agent?.status as string;
      if (seen.at(-1) !== status) seen.push(status);
      if (status !== 'running') return false;
      // read `running`: the agent the platform runs now must answer
      expect(await answers(agentState().url), `status read running before the agent answered (seen ${seen.join(' → ')})`).toBe(true);
      return true;
    },
    60_000,
    20,
  );
  return seen;
}

/**
 * The agent user's processes that are this platform's: in the agent's cgroup, or working in this
 * DATA_DIR. Every fresh database hands out the same first uids, so another platform on this machine
 * (another test run, a bench) may have agents running as the same uid.
 */
const agentUserProcesses = (uid: number) =>
  processesOfUid(uid).filter((pid) => {
    try {
      if (readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(`/agent-platform/${agentId}\n`)) return true;
      return readlinkSync(`/proc/${pid}/cwd`).startsWith(`${dataDir}/`);
    } catch {
      return false; // gone
    }
  });

/** Everything of a stopped platform is gone: its agent's processes and its PostgreSQL server. */
function expectAllStopped(previous: AgentState) {
  expect(isAlive(previous.pid), 'agent process still running').toBe(false);
  if (previous.uid !== undefined) expect(agentUserProcesses(previous.uid), 'processes of the agent user still running').toEqual([]);
  expect(postgresPid(dataDir), 'embedded PostgreSQL still running').toBeUndefined();
}

describe('stopping npm start', () => {
  it('Ctrl-C (SIGINT to the process group), then SIGTERM and SIGHUP to it: exit 0, no stack trace, agents and PostgreSQL stopped', async () => {
    upstream = await startFakeOpenAi({ apiKey: 'router-test-key' });
    [ports.web, ports.backend] = [await freePort(), await freePort()];
    env = {
      DATA_DIR: dataDir,
      WEB_PORT: String(ports.web),
      BACKEND_PORT: String(ports.backend),
      PUBLIC_URL: `http://127.0.0.1:${ports.web}`,
      ADMIN_EMAILS: 'owner@example.com',
      ROUTER_BASE_URL: upstream.url,
      ROUTER_API_KEY: 'router-test-key',
      AGENT_SANDBOX: testAgentSandbox(),
      LOG_LEVEL: 'info', // the start-up and shutdown lines about agents are info
    };
    api = webClient(`http://127.0.0.1:${ports.web}`);

    const first = await startAndWait();
    expect((await api('POST', '/api/register', { email: 'owner@example.com', password: 'correct horse battery' })).status).toBe(201);
    expect((await api('POST', '/api/auth/login', { email: 'owner@example.com', password: 'correct horse battery' })).status).toBe(200);
    const prov = await api('POST', '/api/agents/provision', { name: 'Stopper', model: 'gpt-4' });
    expect(prov.status, JSON.stringify(prov.body)).toBe(201);
    agentId = prov.body.agent.id;
    await watchStatusUntilRunning();

    let platform = first;
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      const agent = agentState();
      expect(await answers(agent.url)).toBe(true);
      process.kill(-platform.child.pid!, signal); // the whole group, as the terminal does
      expect(await platform.exited, `${signal}: ${platform.output()}`).toBe(0);
      expect(platform.output(), signal).not.toMatch(TROUBLE);
      expect(platform.output()).toMatch(/stopped 1 agent with the platform/);
      expectAllStopped(agent);
      if (signal === 'SIGHUP') break;
      // the next start brings the agent back, and says `running` only once it answers (checked at
      // every read: the agent may already answer when the web app first does, then `running` is true)
      platform = await startAndWait();
      await watchStatusUntilRunning();
      // a clean restart is one line, not a crash; nothing about processes that do not exist
      expect(platform.output()).toMatch(/starting 1 agent again after a clean restart/);
      expect(platform.output()).not.toMatch(/previous platform|left running|redeploy queued/);
    }
  }, 180_000);

  it('after SIGKILL the next start takes the agents over, and its Ctrl-C stops them', async () => {
    const killed = await startAndWait();
    await watchStatusUntilRunning();
    const orphan = agentState();
    process.kill(killed.child.pid!, 'SIGKILL');
    await killed.exited;
    // the agent outlives a killed platform (its own process group): it is the next start's to take over
    expect(isAlive(orphan.pid)).toBe(true);

    const next = await startAndWait();
    await watchStatusUntilRunning();
    expect(next.output()).toMatch(/replacing 1 agent process left running by a platform that was killed or crashed/);
    expect(next.output()).not.toMatch(/after a clean restart/);
    // launched again from the stored spec: the orphan is gone, one agent process runs
    await eventually(async () => !isAlive(orphan.pid), 20_000);
    const current = agentState();
    expect(isAlive(current.pid)).toBe(true);
    expect(agentPids(dataDir).size).toBe(1);

    process.kill(-next.child.pid!, 'SIGINT');
    expect(await next.exited, next.output()).toBe(0);
    expect(next.output()).not.toMatch(TROUBLE);
    expectAllStopped(current);
  }, 120_000);
});
