/**
 * POST /api/browse/git-init (docs/agents.md "File explorer"), on both apps: a workspace that is not
 * a repository becomes one, as the agent inside its sandbox (its `.git` belongs to the agent's
 * user), with a `.gitignore` that keeps the runtime's logs and openclaw.json out of "Commit all
 * changes"; the answer is the new git status. A second call leaves the repository as it is
 * (`initialized` false); an existing .gitignore is kept. Another user's agent 404, signed out 401,
 * a cross-site POST 403 and nothing initialised; without the sandbox 503 `GIT_UNAVAILABLE`.
 *
 * Provisioning's `gitInit` (docs/agents.md "A repository from the start"), on the web app and the
 * backend's POST /api/deployments: the deploy job makes the new workspace a repository with one
 * commit by the platform before the agent reads `running`; without it the workspace is not one; a
 * workspace git-init refuses leaves a running agent and the job's `lastError`; without the sandbox
 * 503 `GIT_UNAVAILABLE` and no agent is kept.
 */
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lchownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentWorkspace } from '../../src/domains/agents/drivers/driver.contract.ts';
import { detectSandbox, FIRST_AGENT_UID, runInSandbox } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { INITIAL_COMMIT_MESSAGE } from '../../src/domains/files/files.service.ts';
import { createFakeDriver, type FakeDriver } from '../agents/fake-driver.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';

const sandbox = detectSandbox('auto');
const base = mkdtempSync(join(tmpdir(), 'git-init-'));
chmodSync(base, 0o755); // the agent's user must reach its workspace below it, as under DATA_DIR/agents
const AGENT_UID = sandbox.separateUser ? FIRST_AGENT_UID + 781 : process.getuid!();
let withGit = true;
const workspaceOf = (id: string): AgentWorkspace => {
  const dir = join(base, 'agents', id);
  return {
    dir,
    owner: AGENT_UID,
    ...(sandbox.active && withGit
      ? { run: (file, args, o) => runInSandbox(sandbox, { dir, uid: sandbox.separateUser ? AGENT_UID : undefined }, file, args, o) }
      : {}),
  };
};

let t: AgentsTestPlatform<FakeDriver>;
let owner: { id: string; cookie: string };
let other: { id: string; cookie: string };

/** What a new built-in agent's workspace holds: its runtime's configuration and logs, and a note. */
function seedWorkspace(id: string) {
  const dir = join(base, 'agents', id);
  mkdirSync(join(dir, 'logs'), { recursive: true });
  writeFileSync(join(dir, 'logs', 'runtime.log'), '{"msg":"started"}\n');
  writeFileSync(join(dir, 'openclaw.json'), '{"workspace":"/host/path"}\n');
  writeFileSync(join(dir, 'notes.md'), '# notes\n');
  if (sandbox.separateUser) execFileSync('chown', ['-R', `${AGENT_UID}:${AGENT_UID}`, dir]);
  return dir;
}

const createAgent = async (userId: string, name: string) => {
  const res = await t.backend.inject({
    method: 'POST',
    url: '/api/agents',
    headers: { ...bearer(t), 'x-user-id': userId },
    payload: { name },
  });
  expect(res.statusCode).toBe(201);
  const id = res.json().id as string;
  return { id, dir: seedWorkspace(id) };
};

beforeAll(async () => {
  // a deploy makes the workspace, as the local driver's does
  const driver = Object.assign(createFakeDriver(), { workspace: workspaceOf });
  const deploy = driver.deploy;
  driver.deploy = (spec) => {
    const dir = seedWorkspace(spec.agentId);
    // a workspace whose .gitignore is a link the platform will not follow: git-init refuses it
    if (spec.agentId.startsWith('linked-ignore-')) {
      symlinkSync('/etc/passwd', join(dir, '.gitignore'));
      if (sandbox.separateUser) lchownSync(join(dir, '.gitignore'), AGENT_UID, AGENT_UID);
    }
    return deploy(spec);
  };
  t = await startAgentsPlatform({ driver });
  owner = await subscriber(t, 'label');
  other = await subscriber(t, 'collective');
  mkdirSync(join(base, 'agents'));
  chmodSync(join(base, 'agents'), 0o755);
});
afterAll(async () => {
  await t?.close();
  rmSync(base, { recursive: true, force: true });
});

const onWeb = (agentId: string, headers: Record<string, string> = { cookie: owner.cookie }) =>
  t.web.inject({ method: 'POST', url: `/api/browse/git-init?agentId=${agentId}`, headers, payload: {} });
const onBackend = (agentId: string, userId = owner.id) =>
  t.backend.inject({ method: 'POST', url: `/api/browse/git-init?agentId=${agentId}`, headers: { ...bearer(t), 'x-user-id': userId } });

describe.skipIf(!sandbox.active)('POST /api/browse/git-init', () => {
  it("the web app's session: the workspace becomes a repository owned by the agent, logs and openclaw.json ignored", async () => {
    const { id, dir } = await createAgent(owner.id, 'init-web');
    const before = await t.web.inject({ method: 'GET', url: `/api/browse/git-status?agentId=${id}`, headers: { cookie: owner.cookie } });
    expect(before.json().isGitRepo).toBe(false);

    const res = await onWeb(id);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ ok: true, initialized: true, isGitRepo: true, branch: 'main', remote: null, hasChanges: true });
    expect(body.changes.map((c: { path: string }) => c.path).sort()).toEqual(['.gitignore', 'notes.md']);
    expect(statSync(join(dir, '.git')).uid).toBe(AGENT_UID);
    expect(statSync(join(dir, '.gitignore')).uid).toBe(AGENT_UID);
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toMatch(/^logs\/$/m);

    // "Commit all changes" commits the agent's work, not the runtime's bookkeeping
    const sync = await t.web.inject({
      method: 'POST',
      url: `/api/browse/git-sync?agentId=${id}`,
      headers: { cookie: owner.cookie },
      payload: { message: 'first' },
    });
    expect(sync.statusCode, sync.body).toBe(200);
    expect(sync.json().committed).toBe(true);
    const tracked = execFileSync('git', ['-c', `safe.directory=${dir}`, '-C', dir, 'ls-files'], { encoding: 'utf8' })
      .trim()
      .split('\n');
    expect(tracked.sort()).toEqual(['.gitignore', 'notes.md']);

    // again, on the backend: left as it is
    const again = await onBackend(id);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json()).toMatchObject({ ok: true, initialized: false, isGitRepo: true, branch: 'main', hasChanges: false });
  });

  it("the backend's key for the acting user; an existing .gitignore is kept", async () => {
    const { id, dir } = await createAgent(owner.id, 'init-backend');
    writeFileSync(join(dir, '.gitignore'), 'mine\n');
    if (sandbox.separateUser) execFileSync('chown', [`${AGENT_UID}:${AGENT_UID}`, join(dir, '.gitignore')]);
    const res = await onBackend(id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ initialized: true, isGitRepo: true });
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toBe('mine\n');
    expect(res.json().changes.map((c: { path: string }) => c.path)).toContain('logs/');
  });

  it("another user's agent 404, signed out 401, cross-site 403: nothing initialised", async () => {
    const { id, dir } = await createAgent(owner.id, 'init-refused');
    expect((await onWeb(id, { cookie: other.cookie })).statusCode).toBe(404);
    expect((await onBackend(id, other.id)).statusCode).toBe(404);
    expect((await onWeb(id, {})).statusCode).toBe(401);
    expect((await onWeb(id, { cookie: owner.cookie, origin: 'https://evil.example' })).statusCode).toBe(403);
    expect((await t.web.inject({ method: 'POST', url: '/api/browse/git-init', headers: { cookie: owner.cookie } })).json()).toEqual({
      error: 'agentId required',
    });
    expect(existsSync(join(dir, '.git'))).toBe(false);
  });
});

describe('POST /api/browse/git-init without the agent sandbox', () => {
  it('503 GIT_UNAVAILABLE: git never runs with the platform rights', async () => {
    const { id, dir } = await createAgent(owner.id, 'init-no-sandbox');
    withGit = false;
    try {
      const res = await onWeb(id);
      expect(res.statusCode).toBe(503);
      expect(res.json().code).toBe('GIT_UNAVAILABLE');
      expect(existsSync(join(dir, '.git'))).toBe(false);
    } finally {
      withGit = true;
    }
  });
});

const provisionOnWeb = (name: string, extra: Record<string, unknown> = {}) =>
  t.web.inject({ method: 'POST', url: '/api/agents/provision', headers: { cookie: owner.cookie }, payload: { name, ...extra } });
const running = (id: string) =>
  eventually(async () => {
    const r = await t.web.inject({ method: 'GET', url: `/api/agents/${id}`, headers: { cookie: owner.cookie } });
    return r.json().agent.status === 'running';
  });
const browse = async (id: string, route: string) =>
  (await t.web.inject({ method: 'GET', url: `/api/browse/${route}?agentId=${id}`, headers: { cookie: owner.cookie } })).json();
const tracked = (dir: string) =>
  execFileSync('git', ['-c', `safe.directory=${dir}`, '-C', dir, 'ls-files'], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .sort();

describe.skipIf(!sandbox.active)('provisioning with gitInit', () => {
  it('the web app: running with a repository whose one commit, by the platform, holds the workspace less logs and openclaw.json', async () => {
    const res = await provisionOnWeb('git-from-the-start', { gitInit: true });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().agent.id as string;
    await running(id);
    const status = await browse(id, 'git-status');
    expect(status).toMatchObject({ isGitRepo: true, branch: 'main', hasChanges: false });
    const { commits } = await browse(id, 'git-log');
    expect(commits).toHaveLength(1);
    expect(commits[0]).toMatchObject({ subject: INITIAL_COMMIT_MESSAGE, author: 'Agent platform' });
    const dir = join(base, 'agents', id);
    expect(tracked(dir)).toEqual(['.gitignore', 'notes.md']);
    expect(statSync(join(dir, '.git')).uid).toBe(AGENT_UID); // made by the agent's user, in its sandbox
  });

  it('without gitInit (the default) the workspace is not a repository', async () => {
    const res = await provisionOnWeb('git-not-asked');
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().agent.id as string;
    await running(id);
    expect((await browse(id, 'git-status')).isGitRepo).toBe(false);
    expect(existsSync(join(base, 'agents', id, '.git'))).toBe(false);
  });

  it("the backend's POST /api/deployments: the job says gitInit, succeeds with no error, and the workspace is a repository", async () => {
    const headers = { ...bearer(t), 'x-user-id': owner.id };
    const res = await t.backend.inject({
      method: 'POST',
      url: '/api/deployments',
      headers,
      payload: { name: 'git-on-backend', gitInit: true },
    });
    expect(res.statusCode, res.body).toBe(202);
    const { deployment, agent } = res.json();
    expect(deployment.gitInit).toBe(true);
    const job = await eventually(async () => {
      const j = (await t.backend.inject({ method: 'GET', url: `/api/deployments/${deployment.id}`, headers })).json();
      return j.status === 'succeeded' && j;
    });
    expect(job.lastError).toBeNull();
    expect((await browse(agent.id, 'git-log')).commits.map((c: { subject: string }) => c.subject)).toEqual([INITIAL_COMMIT_MESSAGE]);
  });

  it('a workspace git-init refuses after the deploy: the agent runs all the same, the job says why', async () => {
    const headers = { ...bearer(t), 'x-user-id': owner.id };
    const payload = { name: 'git-refused', agentId: `linked-ignore-${Date.now()}`, gitInit: true };
    const res = await t.backend.inject({ method: 'POST', url: '/api/deployments', headers, payload });
    expect(res.statusCode, res.body).toBe(202);
    const { deployment, agent } = res.json();
    const job = await eventually(async () => {
      const j = (await t.backend.inject({ method: 'GET', url: `/api/deployments/${deployment.id}`, headers })).json();
      return j.status === 'succeeded' && j;
    });
    expect(job.lastError).toBe('Invalid path: a symbolic link is never followed');
    await running(agent.id);
    expect((await browse(agent.id, 'git-log')).commits).toEqual([]);
  });

  it('gitInit must be a boolean: 400 with a sentence', async () => {
    const res = await provisionOnWeb('git-bad', { gitInit: 'yes' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('gitInit: gitInit must be true or false');
  });
});

describe('provisioning with gitInit without the agent sandbox', () => {
  it('503 GIT_UNAVAILABLE on both apps, and no agent is kept', async () => {
    const count = async () => (await t.web.inject({ method: 'GET', url: '/api/agents', headers: { cookie: owner.cookie } })).json().count;
    const before = await count();
    withGit = false;
    try {
      const web = await provisionOnWeb('git-no-sandbox', { gitInit: true });
      expect(web.statusCode, web.body).toBe(503);
      expect(web.json()).toMatchObject({ code: 'GIT_UNAVAILABLE', error: expect.stringMatching(/^gitInit needs git to run as the agent/) });
      const backend = await t.backend.inject({
        method: 'POST',
        url: '/api/deployments',
        headers: { ...bearer(t), 'x-user-id': owner.id },
        payload: { name: 'git-no-sandbox-backend', gitInit: true },
      });
      expect(backend.statusCode, backend.body).toBe(503);
      expect(backend.json().code).toBe('GIT_UNAVAILABLE');
      expect(await count()).toBe(before);
    } finally {
      withGit = true;
    }
  });
});
