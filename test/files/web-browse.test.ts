/**
 * §4.17 file explorer on the web app (`/api/browse/*?agentId=`, the owner's session): every route
 * for the owner, another user's agent 404, signed out 401, `agentId required`, cross-site writes
 * refused, and every refused path answered exactly as the backend's key routes answer it (one files
 * service behind both). The workspace is given the way the local driver gives it (its folder, the
 * agent's uid, git through the sandbox), as in browse.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentWorkspace } from '../../src/domains/agents/drivers/driver.contract.ts';
import { detectSandbox, FIRST_AGENT_UID, runInSandbox } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { createFakeDriver, type FakeDriver } from '../agents/fake-driver.ts';
import { type AgentsTestPlatform, bearer, startAgentsPlatform } from '../agents/helpers.ts';
import { signUp } from '../helpers/platform.ts';

let t: AgentsTestPlatform<FakeDriver>;
const base = mkdtempSync(join(tmpdir(), 'web-browse-'));
chmodSync(base, 0o755); // the agent's user must reach its workspace below it, as under DATA_DIR/agents
const OUTSIDE = 'outside-secret.txt';
const sandbox = detectSandbox('auto');
const AGENT_UID = sandbox.separateUser ? FIRST_AGENT_UID + 778 : process.getuid!();
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

let owner: { id: string; cookie: string };
let other: { id: string; cookie: string };
let agentId: string;
let othersAgentId: string;
let workspace: string;
/** hands everything in the workspace to the agent's user, as if the agent had made it */
const asAgent = (dir = workspace) => {
  if (sandbox.separateUser) execFileSync('chown', ['-R', '-h', `${AGENT_UID}:${AGENT_UID}`, dir]);
};

const createAgent = async (userId: string, name: string) => {
  const res = await t.backend.inject({
    method: 'POST',
    url: '/api/agents',
    headers: { ...bearer(t), 'x-user-id': userId },
    payload: { name },
  });
  expect(res.statusCode).toBe(201);
  return res.json().id as string;
};

beforeAll(async () => {
  t = await startAgentsPlatform({ driver: Object.assign(createFakeDriver(), { workspace: workspaceOf }) });
  owner = await signUp(t.web);
  other = await signUp(t.web);
  agentId = await createAgent(owner.id, 'files');
  othersAgentId = await createAgent(other.id, 'theirs');
  workspace = join(base, 'agents', agentId);
  mkdirSync(join(workspace, 'src'), { recursive: true });
  mkdirSync(join(workspace, 'node_modules', 'x'), { recursive: true });
  writeFileSync(join(workspace, 'a.txt'), 'ay');
  writeFileSync(join(workspace, 'src', 'main.ts'), 'console.log(1)\n');
  writeFileSync(join(workspace, 'big.bin'), Buffer.alloc(1024 * 1024 + 1));
  writeFileSync(join(base, OUTSIDE), 'top secret');
  mkdirSync(join(base, 'outside-dir'));
  // what a hostile agent plants: links leading out of its workspace
  symlinkSync(join(base, 'outside-dir'), join(workspace, 'link-out'));
  symlinkSync(join(base, OUTSIDE), join(workspace, 'link-file'));
  // the other user's agent has a workspace too, so a 404 is the ownership check, not a missing folder
  mkdirSync(join(base, 'agents', othersAgentId), { recursive: true });
  writeFileSync(join(base, 'agents', othersAgentId, 'theirs.txt'), 'not yours');
  chmodSync(join(base, 'agents'), 0o755);
  asAgent();
  asAgent(join(base, 'agents', othersAgentId));
});
afterAll(async () => {
  await t?.close();
  rmSync(base, { recursive: true, force: true });
});

const qs = (params: Record<string, string>) => new URLSearchParams(params).toString();
/** a web call with a session (`cookie`), or signed out (null) */
const web = (method: 'GET' | 'POST', route: string, params: Record<string, string>, cookie: string | null, payload?: object) =>
  t.web.inject({
    method,
    url: `/api/browse/${route}?${qs(params)}`,
    headers: cookie ? { cookie } : {},
    ...(payload ? { payload } : {}),
  });
const get = (route: string, params: Record<string, string> = {}, cookie: string | null = owner.cookie) =>
  web('GET', route, { agentId, ...params }, cookie);
const post = (route: string, payload: object, cookie: string | null = owner.cookie) => web('POST', route, { agentId }, cookie, payload);
/** the same call on the backend, with its key, acting for the owner */
const backend = (method: 'GET' | 'POST', route: string, params: Record<string, string>, payload?: object) =>
  t.backend.inject({
    method,
    url: `/api/browse/${route}?${qs({ agentId, ...params })}`,
    headers: { ...bearer(t), 'x-user-id': owner.id },
    ...(payload ? { payload } : {}),
  });

describe('§4.17 on the web app: the owner', () => {
  it('GET /tree: folders first, excluded folders left out, depth capped as on the backend', async () => {
    const res = await get('tree');
    expect(res.statusCode).toBe(200);
    const names = res.json().root.children.map((c: { name: string }) => c.name);
    expect(names.indexOf('src')).toBeLessThan(names.indexOf('a.txt'));
    expect(names).not.toContain('node_modules');
    expect(names).toEqual(expect.arrayContaining(['link-file', 'link-out'])); // listed, never followed
    expect(res.json()).toEqual((await backend('GET', 'tree', {})).json());
    // §4.17 "cap 4": a larger depth is served at 4, as on the backend
    const tooDeep = await get('tree', { depth: '5' });
    expect(tooDeep.statusCode).toBe(200);
    expect(tooDeep.json()).toEqual((await backend('GET', 'tree', { depth: '5' })).json());
  });

  it('GET /read: content, size and modified time; 400 for a folder, a missing file, a file over 1 MB, no path', async () => {
    const res = await get('read', { path: 'src/main.ts' });
    expect(res.json()).toEqual({ ok: true, path: 'src/main.ts', content: 'console.log(1)\n', size: 15, modified: expect.any(String) });
    for (const path of ['src', 'nope.txt', 'big.bin', '']) {
      const r = await get('read', { path });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual((await backend('GET', 'read', { path })).json());
    }
    expect((await get('read', { path: 'big.bin' })).json().error).toBe('File is larger than 1 MB');
    expect((await get('read')).json().error).toBe('path is required');
  });

  it('POST /write then GET /read: the round trip, folders created, the file the agent user’s', async () => {
    const w = await post('write', { path: 'notes/today.md', content: '# héllo\n' });
    expect(w.statusCode).toBe(200);
    expect(w.json()).toEqual({ ok: true, path: 'notes/today.md', size: 9 });
    expect(readFileSync(join(workspace, 'notes/today.md'), 'utf8')).toBe('# héllo\n');
    expect((await get('read', { path: 'notes/today.md' })).json()).toMatchObject({ content: '# héllo\n', size: 9 });
    // a second save replaces the content
    await post('write', { path: 'notes/today.md', content: 'x' });
    expect((await get('read', { path: 'notes/today.md' })).json().content).toBe('x');
    const { statSync } = await import('node:fs');
    expect(statSync(join(workspace, 'notes/today.md')).uid).toBe(AGENT_UID);
    const noContent = await post('write', { path: 'x.txt' });
    expect(noContent.statusCode).toBe(400);
    expect(noContent.json()).toEqual((await backend('POST', 'write', {}, { path: 'x.txt' })).json());
  });

  it('400 `agentId required` without agentId or with an empty one, on both apps alike', async () => {
    for (const params of [{}, { agentId: '' }] as Record<string, string>[]) {
      const r = await web('GET', 'tree', params, owner.cookie);
      expect(r.statusCode).toBe(400);
      expect(r.json().error).toBe('agentId required');
      const b = await t.backend.inject({ method: 'GET', url: `/api/browse/tree?${qs(params)}`, headers: bearer(t) });
      expect(b.json()).toEqual(r.json());
    }
    expect((await web('POST', 'write', {}, owner.cookie, { path: 'a.txt', content: 'x' })).json().error).toBe('agentId required');
  });
});

describe('§4.17 on the web app: paths refused exactly as the backend refuses them', () => {
  const outsideState = () =>
    JSON.stringify({ secret: readFileSync(join(base, OUTSIDE), 'utf8'), exists: existsSync(join(base, 'outside-dir', 'x.txt')) });
  const attacks: [string, string][] = [
    ['a parent segment', `../${OUTSIDE}`],
    ['nested parent segments', 'src/../../outside-secret.txt'],
    ['an absolute path', '/etc/passwd'],
    ['an absolute path into the base', join(base, OUTSIDE)],
    ['encoded dots', '%2e%2e/outside-secret.txt'],
    ['a planted link to a file outside', 'link-file'],
    ['a planted link to a folder outside', 'link-out/x.txt'],
  ];
  for (const [name, path] of attacks) {
    it(`${name}: 400 with the backend's body on read and write, nothing outside touched`, async () => {
      const before = outsideState();
      const r = await get('read', { path });
      expect(r.statusCode).toBe(400);
      expect(r.body).not.toContain('top secret');
      expect(r.json()).toEqual((await backend('GET', 'read', { path })).json());
      const w = await post('write', { path, content: 'pwned' });
      expect(w.statusCode).toBe(400);
      expect(w.json()).toEqual((await backend('POST', 'write', {}, { path, content: 'pwned' })).json());
      expect(outsideState()).toBe(before);
    });
  }

  it("a name over 255 bytes or a path over 4095 bytes: 400 with the backend's sentence, never ENAMETOOLONG → 500", async () => {
    const long = 'a'.repeat(256); // the fuzzer's minimal trigger (255 × a is a name Linux takes)
    for (const path of [long, `src/${long}`, `e${'\u0301'.repeat(3000)}`, Array.from({ length: 17 }, () => 'é'.repeat(120)).join('/')]) {
      const w = await post('write', { path, content: 'x' });
      expect(w.statusCode).toBe(400);
      expect(w.json().error).toMatch(/^Invalid path: .*longer than (255|4095) bytes$/);
      expect(w.json()).toEqual((await backend('POST', 'write', {}, { path, content: 'x' })).json());
      const r = await get('read', { path });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual(w.json());
    }
    expect(existsSync(join(workspace, long))).toBe(false);
  });

  it('names the reason: traversal and links have their own texts', async () => {
    expect((await get('read', { path: '../x' })).json().error).toBe('Invalid path: it must be relative and stay inside the workspace');
    expect((await get('read', { path: 'link-file' })).json().error).toBe('Invalid path: a symbolic link is never followed');
  });
});

describe('§4.17 on the web app: who may call', () => {
  const routes: ['GET' | 'POST', string, object?][] = [
    ['GET', 'tree'],
    ['GET', 'read'],
    ['POST', 'write', { path: 'a.txt', content: 'x' }],
    ['GET', 'git-status'],
    ['GET', 'git-diff'],
    ['POST', 'git-sync', {}],
    ['GET', 'git-log'],
  ];

  it('signed out: 401 on every route, before anything is read', async () => {
    for (const [method, route, payload] of routes) {
      const r = await web(method, route, { agentId, path: 'a.txt' }, null, payload);
      expect(r.statusCode, route).toBe(401);
      expect(r.json().error).toBe('Unauthorized');
    }
    expect(readFileSync(join(workspace, 'a.txt'), 'utf8')).toBe('ay');
  });

  it("another user's agent is 404 on every route, exactly as an unknown one; nothing of theirs is read or written", async () => {
    for (const [method, route, payload] of routes) {
      const theirs = await web(method, route, { agentId: othersAgentId, path: 'theirs.txt' }, owner.cookie, payload);
      expect(theirs.statusCode, route).toBe(404);
      const unknown = await web(method, route, { agentId: 'no-such-agent', path: 'theirs.txt' }, owner.cookie, payload);
      expect(theirs.json()).toEqual(unknown.json());
      // and the other way round: the owner's agent is not the other user's
      expect((await web(method, route, { agentId, path: 'a.txt' }, other.cookie, payload)).statusCode, route).toBe(404);
    }
    expect(existsSync(join(base, 'agents', othersAgentId, 'a.txt'))).toBe(false);
    expect(readFileSync(join(workspace, 'a.txt'), 'utf8')).toBe('ay');
    // the other user sees their own agent's files
    const own = await web('GET', 'read', { agentId: othersAgentId, path: 'theirs.txt' }, other.cookie);
    expect(own.statusCode).toBe(200);
  });

  it('a cross-site write or git-sync with the session cookie is refused (403) and writes nothing', async () => {
    for (const [route, payload] of [
      ['write', { path: 'csrf.txt', content: 'x' }],
      ['git-sync', {}],
    ] as const) {
      const r = await t.web.inject({
        method: 'POST',
        url: `/api/browse/${route}?${qs({ agentId })}`,
        headers: { cookie: owner.cookie, origin: 'https://evil.example' },
        payload,
      });
      expect(r.statusCode).toBe(403);
      expect(r.json().error).toBe('Cross-site request refused');
    }
    expect(existsSync(join(workspace, 'csrf.txt'))).toBe(false);
  });
});

describe.skipIf(!sandbox.active)('§4.17 git on the web app (as the agent, in its sandbox)', () => {
  it('not a repository: status says so, diff and sync answer as the backend does', async () => {
    expect((await get('git-status')).json()).toEqual({
      ok: true,
      isGitRepo: false,
      branch: null,
      remote: null,
      changes: [],
      hasChanges: false,
    });
    expect((await get('git-log')).json()).toEqual({ ok: true, commits: [] });
    const diff = await get('git-diff');
    expect(diff.statusCode).toBe(500);
    expect(diff.json()).toEqual({ error: 'The workspace is not a git repository', code: 'NOT_A_REPOSITORY' });
    expect((await post('git-sync', {})).json()).toEqual(diff.json());
  });

  it('status, diff, sync and log on a repository', async () => {
    execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: workspace });
    asAgent();
    const status = await get('git-status');
    expect(status.json()).toMatchObject({ ok: true, isGitRepo: true, branch: 'main', remote: null, hasChanges: true });
    expect(status.json().changes).toEqual(expect.arrayContaining([{ status: '??', path: 'a.txt' }]));
    expect(status.json()).toEqual((await backend('GET', 'git-status', {})).json());
    const sync = await post('git-sync', { message: 'first' });
    expect(sync.json()).toMatchObject({
      ok: true,
      committed: true,
      pushed: false,
      hash: expect.stringMatching(/^[0-9a-f]{40}$/),
      message: 'first',
    });
    // an edit through the explorer shows in the diff, for one file or for all
    await post('write', { path: 'a.txt', content: 'changed\n' });
    expect((await get('git-status')).json().changes).toEqual([{ status: 'M', path: 'a.txt' }]);
    const diff = (await get('git-diff', { path: 'a.txt' })).json();
    expect(diff).toEqual({ ok: true, unstaged: expect.stringContaining('+changed'), staged: null });
    expect((await get('git-diff')).json()).toEqual(diff);
    expect((await get('git-diff', { path: '../x' })).statusCode).toBe(400);
    expect((await post('git-sync', {})).json()).toMatchObject({ committed: true, message: 'sync changes' });
    const log = (await get('git-log', { limit: '2' })).json();
    expect(log.commits.map((c: { subject: string }) => c.subject)).toEqual(['sync changes', 'first']);
    expect((await get('git-log', { limit: '101' })).json().commits).toHaveLength(2); // §4.17 "cap 100": served at 100
    expect((await post('git-sync', {})).json()).toMatchObject({ committed: false });
  });
});

describe('§4.17 git on the web app without a sandbox', () => {
  it("503 GIT_UNAVAILABLE with the backend's sentence instead of running git with the platform's rights", async () => {
    withGit = false;
    try {
      for (const [r, b] of [
        [await get('git-status'), await backend('GET', 'git-status', {})],
        [await get('git-diff'), await backend('GET', 'git-diff', {})],
        [await get('git-log'), await backend('GET', 'git-log', {})],
        [await post('git-sync', {}), await backend('POST', 'git-sync', {}, {})],
      ]) {
        expect(r!.statusCode).toBe(503);
        expect(r!.json().code).toBe('GIT_UNAVAILABLE');
        expect(r!.json()).toEqual(b!.json());
      }
    } finally {
      withGit = true;
    }
  });
});
