/**
 * §4.17 file explorer (backend, bearer key; `/api/browse/*?agentId=`) over a real folder standing
 * for an agent's workspace: tree order and exclusions, read/write limits, git, and path traversal
 * in every form refused with 400 without touching anything outside the workspace. The workspace is
 * given the way the local driver gives it (its folder, the agent's uid, git through the sandbox),
 * so what a hostile agent plants there (docs/security.md N1, N9) is tested against the real confinement.
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentWorkspace } from '../../src/domains/agents/drivers/driver.contract.ts';
import { detectSandbox, FIRST_AGENT_UID, runInSandbox } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { createFakeDriver, type FakeDriver } from '../agents/fake-driver.ts';
import { type AgentsTestPlatform, bearer, startAgentsPlatform } from '../agents/helpers.ts';

let t: AgentsTestPlatform<FakeDriver>;
const base = mkdtempSync(join(tmpdir(), 'browse-'));
chmodSync(base, 0o755); // the agent's user must reach its workspace below it, as under DATA_DIR/agents
let workspace: string;
let agentId: string;
const OUTSIDE = 'outside-secret.txt';
const sandbox = detectSandbox('auto');
/** the agent's own user: a uid of its own as root (the local driver's case), else ours */
const AGENT_UID = sandbox.separateUser ? FIRST_AGENT_UID + 777 : process.getuid!();
/** hands everything in the workspace to the agent's user, as if the agent had made it */
const asAgent = () => {
  if (sandbox.separateUser) execFileSync('chown', ['-R', '-h', `${AGENT_UID}:${AGENT_UID}`, workspace]);
};
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

beforeAll(async () => {
  const fake = createFakeDriver();
  const driver = Object.assign(fake, { workspace: workspaceOf });
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
  mkdirSync(join(base, 'agents'), { recursive: true, mode: 0o755 });
  chmodSync(join(base, 'agents'), 0o755);
  asAgent();
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
  it('folders first, alphabetical, excluded folders left out, depth default 3 and capped at 4 (a larger one served at 4)', async () => {
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
    // §4.17 "cap 4": a larger depth is served at 4
    const four = await get('tree', { depth: '4' });
    expect(four.statusCode).toBe(200);
    expect((await get('tree', { depth: '5' })).json()).toEqual(four.json());
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
    // the agent's, like everything else in its workspace (folders and file handed over by descriptor)
    const { statSync } = await import('node:fs');
    for (const p of ['new', 'new/dir', 'new/dir/note.md']) expect(statSync(join(workspace, p)).uid).toBe(AGENT_UID);
    // an existing file is replaced, not appended to
    await post('write', { path: 'new/dir/note.md', content: 'x' });
    expect(readFileSync(join(workspace, 'new/dir/note.md'), 'utf8')).toBe('x');
    expect((await post('write', { path: 'x.txt' })).statusCode).toBe(400);
  });

  it('a file the agent grows between the size check and the read is never answered over 1 MB (docs/agents.md "File explorer")', async () => {
    const file = join(workspace, 'grow.txt');
    writeFileSync(file, 'ten bytes!');
    asAgent();
    // the agent toggles its file between 10 bytes and 400 MB (sparse) as fast as it can, as the audit did
    const toggler = spawn('sh', ['-c', `while :; do truncate -s 10 ${file}; truncate -s 400M ${file}; done`], { stdio: 'ignore' });
    try {
      const statuses = new Set<number>();
      for (let i = 0; i < 100; i++) {
        const r = await get('read', { path: 'grow.txt' });
        statuses.add(r.statusCode);
        expect([200, 400]).toContain(r.statusCode);
        if (r.statusCode === 200) {
          expect(r.json().content.length).toBeLessThanOrEqual(1024 * 1024);
          expect(r.json().size).toBe(Buffer.byteLength(r.json().content));
        } else expect(r.json().error).toBe('File is larger than 1 MB');
      }
      expect(statuses.has(400)).toBe(true); // the race was run, not won from the start
    } finally {
      toggler.kill('SIGKILL');
      await new Promise((r) => toggler.once('exit', r));
      rmSync(file, { force: true });
    }
  });

  it('a name over 255 bytes or a path over 4095 bytes is 400 with a sentence on read, write and diff (never ENAMETOOLONG → 500)', async () => {
    const long = 'a'.repeat(256);
    // the fuzzer's own: one letter and 3000 combining marks (3001 UTF-16 units, 6001 bytes)
    const marks = `e${'\u0301'.repeat(3000)}`;
    // 17 names of 240 bytes each: 2056 characters, 4096 bytes
    const deep = Array.from({ length: 17 }, () => 'é'.repeat(120)).join('/');
    for (const path of [long, `src/${long}`, `${long}/x.txt`, marks, deep, 'c'.repeat(5000)]) {
      const r = await get('read', { path });
      expect(r.statusCode, path.slice(0, 20)).toBe(400);
      expect(r.json().error).toMatch(/^Invalid path: .*longer than (255|4095) bytes$/);
      const w = await post('write', { path, content: 'x' });
      expect(w.statusCode).toBe(400);
      expect(w.json()).toEqual(r.json());
      expect((await get('git-diff', { path })).json()).toEqual(r.json());
    }
    expect(readdirSync(workspace).some((n) => n.startsWith('aaaa'))).toBe(false);
    // 255 bytes is a name Linux takes
    expect((await post('write', { path: 'a'.repeat(255), content: 'x' })).json()).toMatchObject({ ok: true, size: 1 });
    rmSync(join(workspace, 'a'.repeat(255)));
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

describe.skipIf(!sandbox.active)('§4.17 git (as the agent, in its sandbox)', () => {
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
    asAgent();
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
    // §4.17 "cap 100": a larger limit is served at 100
    expect((await get('git-log', { limit: '101' })).json().commits).toHaveLength(2);
  });

  it("never runs what the agent planted with the platform's rights (docs/security.md N1): hooks, fsmonitor, filters, diff drivers", async () => {
    // what a hostile agent writes into its repository: every program git could be made to start
    const marker = join(base, 'pwned-by-git');
    const inWorkspace = join(workspace, 'ran-as.txt');
    const payload = `#!/bin/sh\nid -u > ${marker}; id -u > ${inWorkspace}\n`;
    mkdirSync(join(workspace, '.git', 'hooks'), { recursive: true });
    for (const hook of ['pre-commit', 'post-commit', 'pre-push', 'post-index-change']) {
      writeFileSync(join(workspace, '.git', 'hooks', hook), payload, { mode: 0o755 });
    }
    writeFileSync(join(workspace, 'evil.sh'), payload, { mode: 0o755 });
    execFileSync('git', ['config', '--file', '.git/config', 'core.fsmonitor', join(workspace, 'evil.sh')], { cwd: workspace });
    execFileSync('git', ['config', '--file', '.git/config', 'diff.external', join(workspace, 'evil.sh')], { cwd: workspace });
    execFileSync('git', ['config', '--file', '.git/config', 'filter.x.clean', `sh ${join(workspace, 'evil.sh')}`], { cwd: workspace });
    execFileSync('git', ['config', '--file', '.git/config', 'filter.x.smudge', `sh ${join(workspace, 'evil.sh')}`], { cwd: workspace });
    writeFileSync(join(workspace, '.gitattributes'), '*.txt filter=x diff=x\n');
    execFileSync('git', ['config', '--file', '.git/config', 'diff.x.textconv', `sh ${join(workspace, 'evil.sh')}`], { cwd: workspace });
    writeFileSync(join(workspace, 'b.txt'), 'changed again');
    asAgent();
    expect((await get('git-status')).statusCode).toBe(200);
    expect((await get('git-diff')).statusCode).toBe(200);
    const sync = await post('git-sync', { message: 'planted' });
    expect(sync.statusCode).toBe(200);
    // nothing ran outside the sandbox (the base folder is not even visible inside it)
    expect(existsSync(marker)).toBe(false);
    // whatever did run (the clean filter is part of staging), ran as the agent's user, not root
    if (existsSync(inWorkspace)) expect(readFileSync(inWorkspace, 'utf8').trim()).toBe(String(AGENT_UID));
  });
});

describe('§4.17 git without a sandbox', () => {
  it("answers 503 with a sentence instead of running git with the platform's rights", async () => {
    withGit = false;
    try {
      for (const r of [await get('git-status'), await get('git-log'), await get('git-diff'), await post('git-sync', {})]) {
        expect(r.statusCode).toBe(503);
        expect(r.json().error).toMatch(/sandbox/);
      }
    } finally {
      withGit = true;
    }
  });
});

describe('§4.17 what a hostile agent plants (docs/security.md N9)', () => {
  it('a folder swapped for a link while files are read never leads outside the workspace', async () => {
    writeFileSync(join(base, 'secret.txt'), 'top secret');
    mkdirSync(join(workspace, 'd'));
    writeFileSync(join(workspace, 'd', 'secret.txt'), 'decoy');
    asAgent();
    // the agent flips d between its own folder and a link to the platform's folder, as fast as it can
    let flipping = true;
    const flipper = (async () => {
      while (flipping) {
        try {
          renameSync(join(workspace, 'd'), join(workspace, 'd-real'));
          symlinkSync(base, join(workspace, 'd'));
          await new Promise((r) => setImmediate(r));
          rmSync(join(workspace, 'd'));
          renameSync(join(workspace, 'd-real'), join(workspace, 'd'));
          await new Promise((r) => setImmediate(r));
        } catch {
          // a write made `d` again while it was away: put the real folder back in place
          rmSync(join(workspace, 'd'), { recursive: true, force: true });
          if (existsSync(join(workspace, 'd-real'))) renameSync(join(workspace, 'd-real'), join(workspace, 'd'));
          await new Promise((r) => setImmediate(r));
        }
      }
    })();
    const seen = new Set<string>();
    for (let i = 0; i < 120; i++) {
      const [r, w] = await Promise.all([get('read', { path: 'd/secret.txt' }), post('write', { path: 'd/secret.txt', content: `decoy` })]);
      seen.add(r.statusCode === 200 ? r.json().content : `${r.statusCode}`);
      expect([200, 400]).toContain(w.statusCode);
    }
    flipping = false;
    await flipper;
    expect(seen.has('top secret')).toBe(false);
    expect(readFileSync(join(base, 'secret.txt'), 'utf8')).toBe('top secret');
    expect(seen.has('decoy')).toBe(true); // the race was run, not refused from the start
  });

  it('a FIFO is refused at once, not waited on', async () => {
    execFileSync('mkfifo', [join(workspace, 'pipe')]);
    asAgent();
    const r = await get('read', { path: 'pipe' });
    expect(r.statusCode).toBe(400);
    expect((await post('write', { path: 'pipe', content: 'x' })).statusCode).toBe(400);
  });

  it.skipIf(!sandbox.separateUser)("a file that is not the agent's own (e.g. hard-linked in) is neither read nor written", async () => {
    writeFileSync(join(workspace, 'roots.txt'), 'root owned'); // left root's: not the agent's
    const r = await get('read', { path: 'roots.txt' });
    expect(r.statusCode).toBe(400);
    expect(r.body).not.toContain('root owned');
    expect((await post('write', { path: 'roots.txt', content: 'x' })).statusCode).toBe(400);
    expect(readFileSync(join(workspace, 'roots.txt'), 'utf8')).toBe('root owned');
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
