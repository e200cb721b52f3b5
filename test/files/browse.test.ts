/**
 * §4.17 file explorer (backend, bearer key; `/api/browse/*?agentId=`) over a real folder standing
 * for an agent's workspace: tree order and exclusions, read/write limits, git, and path traversal
 * in every form refused with 400 without touching anything outside the workspace.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFakeDriver, type FakeDriver } from '../agents/fake-driver.ts';
import { type AgentsTestPlatform, bearer, startAgentsPlatform } from '../agents/helpers.ts';

let t: AgentsTestPlatform<FakeDriver>;
const base = mkdtempSync(join(tmpdir(), 'browse-'));
let workspace: string;
let agentId: string;
const OUTSIDE = 'outside-secret.txt';

beforeAll(async () => {
  const fake = createFakeDriver();
  const driver = Object.assign(fake, { workspaceDir: (id: string) => join(base, 'agents', id) });
  t = await startAgentsPlatform({ driver });
  const created = await t.backend.inject({ method: 'POST', url: '/api/agents', headers: bearer(t), payload: { name: 'files' } });
  expect(created.statusCode).toBe(201);
  agentId = created.json().id ?? created.json().agent?.id;
  workspace = join(base, 'agents', agentId);
  mkdirSync(join(workspace, 'src', 'deep', 'deeper', 'deepest', 'bottom'), { recursive: true });
  mkdirSync(join(workspace, 'node_modules', 'x'), { recursive: true });
  mkdirSync(join(workspace, 'Docs'), { recursive: true });
  writeFileSync(join(workspace, 'b.txt'), 'bee');
  writeFileSync(join(workspace, 'a.txt'), 'ay');
  writeFileSync(join(workspace, 'src', 'main.ts'), 'console.log(1)\n');
  writeFileSync(join(workspace, 'big.bin'), Buffer.alloc(1024 * 1024 + 1));
  writeFileSync(join(base, OUTSIDE), 'top secret');
  mkdirSync(join(base, 'outside-dir'));
  symlinkSync(join(base, 'outside-dir'), join(workspace, 'link-out'));
  symlinkSync(join(base, OUTSIDE), join(workspace, 'link-file'));
});
afterAll(async () => {
  await t?.close();
  rmSync(base, { recursive: true, force: true });
});

const q = (params: Record<string, string>) => new URLSearchParams({ agentId, ...params }).toString();
const get = (route: string, params: Record<string, string> = {}) =>
  t.backend.inject({ method: 'GET', url: `/api/browse/${route}?${q(params)}`, headers: bearer(t) });
const post = (route: string, payload: object) =>
  t.backend.inject({ method: 'POST', url: `/api/browse/${route}?${q({})}`, headers: bearer(t), payload });

/** Everything outside the workspace, to prove a refused call changed nothing. */
const outsideState = () =>
  JSON.stringify({
    files: readdirSync(base).sort(),
    secret: readFileSync(join(base, OUTSIDE), 'utf8'),
    dir: readdirSync(join(base, 'outside-dir')),
  });

describe('§4.17 tree', () => {
  it('folders first, alphabetical, excluded folders left out, depth default 3 and capped at 4', async () => {
    const res = await get('tree');
    expect(res.statusCode).toBe(200);
    const root = res.json().root;
    const names = root.children.map((c: { name: string }) => c.name);
    expect(names.indexOf('Docs')).toBeLessThan(names.indexOf('a.txt'));
    expect(names).not.toContain('node_modules');
    expect(names.filter((n: string) => n.endsWith('.txt'))).toEqual(['a.txt', 'b.txt']);
    const depthOf = (n: { children?: unknown[] }): number =>
      1 + Math.max(0, ...((n.children ?? []) as { children?: unknown[] }[]).map(depthOf));
    expect(depthOf(root)).toBe(4); // root + 3 levels: src/deep/deeper, then no children
    const src = root.children.find((c: { name: string }) => c.name === 'src');
    expect(src.children.map((c: { name: string; path: string }) => [c.name, c.path])).toEqual([
      ['deep', 'src/deep'],
      ['main.ts', 'src/main.ts'],
    ]);
    expect((await get('tree', { depth: '5' })).statusCode).toBe(400);
    expect((await get('tree', { depth: '4' })).statusCode).toBe(200);
  });
});

describe('§4.17 read and write', () => {
  it('reads a file with size and modified time; 400 for a folder, a missing file, a file over 1 MB, no path', async () => {
    const res = await get('read', { path: 'src/main.ts' });
    expect(res.json()).toEqual({ ok: true, path: 'src/main.ts', content: 'console.log(1)\n', size: 15, modified: expect.any(String) });
    for (const path of ['src', 'nope.txt', 'big.bin']) expect((await get('read', { path })).statusCode).toBe(400);
    expect((await get('read')).statusCode).toBe(400);
  });

  it('writes a file, creating its folders', async () => {
    const res = await post('write', { path: 'new/dir/note.md', content: 'héllo' });
    expect(res.json()).toEqual({ ok: true, path: 'new/dir/note.md', size: 6 });
    expect(readFileSync(join(workspace, 'new/dir/note.md'), 'utf8')).toBe('héllo');
    expect((await post('write', { path: 'x.txt' })).statusCode).toBe(400);
  });

  const attacks: [string, string][] = [
    ['parent segment', `../${OUTSIDE}`],
    ['nested parent segments', 'src/../../outside-secret.txt'],
    ['absolute path', '/etc/passwd'],
    ['absolute path into the base', join(base, OUTSIDE)],
    ['NUL byte', 'a.txt\u0000.png'],
    ['backslashes', '..\\outside-secret.txt'],
    ['encoded slash', '..%2foutside-secret.txt'],
    ['encoded dots', '%2e%2e/outside-secret.txt'],
    ['symlinked folder leading outside', 'link-out/secret.txt'],
    ['symlink to a file outside', 'link-file'],
  ];
  for (const [name, path] of attacks) {
    it(`traversal by ${name} → 400 on read and write, nothing outside touched`, async () => {
      const before = outsideState();
      const r = await get('read', { path });
      expect(r.statusCode).toBe(400);
      expect(r.json().error).toEqual(expect.any(String));
      expect(r.body).not.toContain('top secret');
      const w = await post('write', { path, content: 'pwned' });
      expect(w.statusCode).toBe(400);
      expect(outsideState()).toBe(before);
      expect(existsSync('/etc/passwd') && readFileSync('/etc/passwd', 'utf8').includes('pwned')).toBe(false);
    });
  }
});

describe('§4.17 git', () => {
  it('status, diff, sync and log on a repository; not a repository before git init', async () => {
    expect((await get('git-status')).json()).toEqual({
      ok: true,
      isGitRepo: false,
      branch: null,
      remote: null,
      changes: [],
      hasChanges: false,
    });
    expect((await post('git-sync', {})).statusCode).toBe(500);
    execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: workspace });
    const status = (await get('git-status')).json();
    expect(status).toMatchObject({ ok: true, isGitRepo: true, branch: 'main', remote: null, hasChanges: true });
    expect(status.changes).toEqual(expect.arrayContaining([{ status: '??', path: 'a.txt' }]));
    const sync = (await post('git-sync', { message: 'first' })).json();
    expect(sync).toMatchObject({
      ok: true,
      committed: true,
      pushed: false,
      hash: expect.stringMatching(/^[0-9a-f]{40}$/),
      message: 'first',
    });
    writeFileSync(join(workspace, 'a.txt'), 'changed');
    expect((await get('git-diff', { path: 'a.txt' })).json()).toEqual({
      ok: true,
      unstaged: expect.stringContaining('+changed'),
      staged: null,
    });
    expect((await post('git-sync', {})).json()).toMatchObject({ committed: true, message: 'sync changes' });
    const log = (await get('git-log', { limit: '1' })).json();
    expect(log.commits).toEqual([
      {
        hash: expect.any(String),
        shortHash: expect.any(String),
        subject: 'sync changes',
        author: 'Agent platform',
        date: expect.any(String),
      },
    ]);
    expect((await get('git-log', { limit: '101' })).statusCode).toBe(400);
  });
});

describe('§4.17 access', () => {
  it("401 without the key; 404 for an unknown agent or another user's; 400 without agentId", async () => {
    expect((await t.backend.inject({ method: 'GET', url: `/api/browse/tree?${q({})}` })).statusCode).toBe(401);
    expect((await t.backend.inject({ method: 'GET', url: `/api/browse/tree?agentId=nope-agent`, headers: bearer(t) })).statusCode).toBe(
      404,
    );
    const other = await t.backend.inject({
      method: 'GET',
      url: `/api/browse/tree?${q({})}`,
      headers: { ...bearer(t), 'x-user-id': '00000000-0000-4000-8000-000000000001' },
    });
    expect(other.statusCode).toBe(404);
    expect((await t.backend.inject({ method: 'GET', url: '/api/browse/tree', headers: bearer(t) })).statusCode).toBe(400);
  });
});
