/**
 * A second start harms nothing (docs/configuration.md "Several platforms on one machine"): while a
 * platform runs on a DATA_DIR, a start that would run the backend on the same data (whatever its
 * ports), or listen on a port the running one holds, exits with one line naming the running
 * platform (pid, ports) and the command for a second one, exit code 1, no stack trace — before it
 * opens the database: the running platform's agent keeps its process and no deployment is queued
 * for it. A web process beside the backend on the same data (the platform's other half, or a
 * replica on another port) still comes up, and a DATA_DIR of its own with a taken port is refused
 * with a line naming the setting.
 */
import { chmodSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import {
  agentPids,
  buildScratchServer,
  eventually,
  isAlive,
  killLeftovers,
  removeTree,
  type Started,
  startPlatform,
  TROUBLE,
  waitFor,
  webClient,
} from './helpers.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'platform-second-'));
const otherDataDir = mkdtempSync(join(tmpdir(), 'platform-second-other-'));
for (const d of [dataDir, otherDataDir]) chmodSync(d, 0o755); // the embedded server runs as the postgres OS user when we are root
const { main: MAIN, out } = buildScratchServer('second');

afterAll(async () => {
  await killLeftovers([dataDir, otherDataDir]);
  removeTree(dataDir);
  removeTree(otherDataDir);
  removeTree(out);
});

/** The deployments recorded in the running platform's embedded database (its superuser, its port). */
async function deploymentCount(): Promise<number> {
  const password = (JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as { embeddedDbPassword: string }).embeddedDbPassword;
  const port = Number(readFileSync(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[3]);
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'platform' });
  await client.connect();
  try {
    return Number((await client.query('SELECT count(*) AS n FROM deployments')).rows[0].n);
  } finally {
    await client.end();
  }
}

async function refused(p: Started): Promise<string> {
  const code = await Promise.race([p.exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 60_000))]);
  expect(code, p.output()).toBe(1);
  const lines = p.output().trim().split('\n');
  expect(lines, p.output()).toHaveLength(1);
  expect(p.output()).not.toMatch(TROUBLE);
  return lines[0]!;
}

async function stop(p: Started) {
  p.child.kill('SIGINT');
  expect(await p.exited, p.output()).toBe(0);
}

describe('a second start on a running platform', () => {
  it('is refused with one line before it touches anything; the running agents keep their processes; a web half still joins', async () => {
    const [web, backend, web2, backend2] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    const split = { DATA_DIR: dataDir, INTERNAL_API_KEY: 'second-start-key', WEB_PORT: String(web), BACKEND_PORT: String(backend) };
    // the platform in two halves on one DATA_DIR: both come up
    const backendHalf = startPlatform(MAIN, ['backend'], split);
    await waitFor(`http://127.0.0.1:${backend}/health`, 120_000);
    const webHalf = startPlatform(MAIN, ['web'], { ...split, BACKEND_URL: `http://127.0.0.1:${backend}` });
    expect((await waitFor(`http://127.0.0.1:${web}/api/health`, 120_000)).status).toBe(200);

    const api = webClient(`http://127.0.0.1:${web}`);
    expect((await api('POST', '/api/register', { email: 'first@example.com', password: 'correct horse battery' })).status).toBe(201);
    expect((await api('POST', '/api/auth/login', { email: 'first@example.com', password: 'correct horse battery' })).status).toBe(200);
    const prov = await api('POST', '/api/agents/provision', { name: 'Running one' });
    expect(prov.status, JSON.stringify(prov.body)).toBe(201);
    const agentId = prov.body.agent.id as string;
    await eventually(async () => (await api('GET', `/api/agents/${agentId}`)).body.agent?.status === 'running', 90_000, 200);
    const agentPid = agentPids(dataDir).get(agentId)!;
    expect(isAlive(agentPid)).toBe(true);
    const deployments = await deploymentCount();

    // 1. `npm start` again with the same settings: names the backend that runs and how to run a second platform
    const same = await refused(startPlatform(MAIN, [], split));
    expect(same).toContain(`pid ${backendHalf.child.pid}`);
    expect(same).toContain(`backend on port ${backend}`);
    expect(same).toContain(dataDir);
    expect(same).toMatch(/DATA_DIR=\S+ WEB_PORT=\d+ BACKEND_PORT=\d+ npm start/);
    // 2. a backend on other ports, same data: it would take over the agents all the same
    const otherPorts = await refused(
      startPlatform(MAIN, ['backend'], { ...split, WEB_PORT: String(web2), BACKEND_PORT: String(backend2) }),
    );
    expect(otherPorts).toContain('both would run its backend');
    // 3. a web process on the web half's port
    const samePort = await refused(startPlatform(MAIN, ['web'], split));
    expect(samePort).toContain(`pid ${webHalf.child.pid}`);
    expect(samePort).toContain(`both would listen on port ${web}`);
    // 4. data of its own, but the running platform's web port
    const port = await refused(startPlatform(MAIN, [], { DATA_DIR: otherDataDir, WEB_PORT: String(web), BACKEND_PORT: String(backend2) }));
    expect(port).toMatch(new RegExp(`^WEB_PORT ${web} on 127\\.0\\.0\\.1 is in use`));
    expect(port).toMatch(/WEB_PORT=\d+ BACKEND_PORT=\d+ npm start$/);

    // none of them reached the agent: same process, no deployment queued, nothing redeployed. Each
    // has exited by now, so whatever it did is done: a job it queued is a row of deployments
    // (counted, whether or not the running backend took it yet), an agent it touched has another pid
    expect(agentPids(dataDir).get(agentId)).toBe(agentPid);
    expect(isAlive(agentPid)).toBe(true);
    expect(await deploymentCount()).toBe(deployments);
    expect((await api('GET', `/api/agents/${agentId}`)).body.agent.status).toBe('running');
    expect(backendHalf.output()).not.toMatch(/redeploy|deployment finished/i);

    // a second web process on another port is a replica of the same platform: it comes up
    const replica = startPlatform(MAIN, ['web'], { ...split, WEB_PORT: String(web2), BACKEND_URL: `http://127.0.0.1:${backend}` });
    expect((await waitFor(`http://127.0.0.1:${web2}/api/health`, 120_000)).status).toBe(200);
    await stop(replica);
    await stop(webHalf);
    await stop(backendHalf);
    expect(isAlive(agentPid)).toBe(false);

    // with the platform stopped (its registrations gone with it), the same start comes up
    const next = startPlatform(MAIN, [], split);
    expect((await waitFor(`http://127.0.0.1:${web}/api/health`, 120_000)).status).toBe(200);
    await stop(next);
  }, 400_000);
});
