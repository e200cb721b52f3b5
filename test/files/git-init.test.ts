/**
 * POST /api/browse/git-init (docs/agents.md "File explorer"), on both apps: a workspace that is not
 * a repository becomes one, as the agent inside its sandbox (its `.git` belongs to the agent's
 * user), with a `.gitignore` that keeps the runtime's logs and openclaw.json out of "Commit all
 * changes"; the answer is the new git status. A second call leaves the repository as it is
 * (`initialized` false); an existing .gitignore is kept. Another user's agent 404, signed out 401,
 * a cross-site POST 403 and nothing initialised; without the sandbox 503 `GIT_UNAVAILABLE`.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentWorkspace } from '../../src/domains/agents/drivers/driver.contract.ts';
import { detectSandbox, FIRST_AGENT_UID, runInSandbox } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { createFakeDriver, type FakeDriver } from '../agents/fake-driver.ts';
import { type AgentsTestPlatform, bearer, startAgentsPlatform } from '../agents/helpers.ts';
import { signUp } from '../helpers/platform.ts';

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

const createAgent = async (userId: string, name: string) => {
  const res = await t.backend.inject({
    method: 'POST',
    url: '/api/agents',
    headers: { ...bearer(t), 'x-user-id': userId },
    payload: { name },
  });
  expect(res.statusCode).toBe(201);
  const id = res.json().id as string;
  // what a new built-in agent's workspace holds: its runtime's configuration and logs
  const dir = join(base, 'agents', id);
  mkdirSync(join(dir, 'logs'), { recursive: true });
  writeFileSync(join(dir, 'logs', 'runtime.log'), '{"msg":"started"}\n');
  writeFileSync(join(dir, 'openclaw.json'), '{"workspace":"/host/path"}\n');
  writeFileSync(join(dir, 'notes.md'), '# notes\n');
  if (sandbox.separateUser) execFileSync('chown', ['-R', `${AGENT_UID}:${AGENT_UID}`, dir]);
  return { id, dir };
};

beforeAll(async () => {
  t = await startAgentsPlatform({ driver: Object.assign(createFakeDriver(), { workspace: workspaceOf }) });
  owner = await signUp(t.web);
  other = await signUp(t.web);
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
