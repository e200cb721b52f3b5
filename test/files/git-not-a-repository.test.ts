/**
 * §4.17 git on a workspace that is not a repository (a new built-in agent's is not one), on both
 * apps: git-status answers 200 with `isGitRepo: false`, git-diff and git-sync answer the
 * catalogue's 500 `NOT_A_REPOSITORY` ("500 when not a repository"), and each of those writes one
 * warn line without a stack, not the error line with a trace of an unexpected failure. Also the
 * §4.17 caps: `depth` above 4 and git-log `limit` above 100 are served at the cap, not refused.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { AgentWorkspace } from '../../src/domains/agents/drivers/driver.contract.ts';
import { detectSandbox, FIRST_AGENT_UID, runInSandbox } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
import { createFakeDriver } from '../agents/fake-driver.ts';
import { bearer } from '../agents/helpers.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const sandbox = detectSandbox('auto');
const base = mkdtempSync(join(tmpdir(), 'git-none-'));
chmodSync(base, 0o755);
const AGENT_UID = sandbox.separateUser ? FIRST_AGENT_UID + 779 : process.getuid!();
const workspaceOf = (id: string): AgentWorkspace => {
  const dir = join(base, 'agents', id);
  return {
    dir,
    owner: AGENT_UID,
    ...(sandbox.active
      ? { run: (file, args, o) => runInSandbox(sandbox, { dir, uid: sandbox.separateUser ? AGENT_UID : undefined }, file, args, o) }
      : {}),
  };
};

/** every JSON line both apps log */
let lines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
    done();
  },
});

let t: TestPlatform;
let owner: { id: string; cookie: string };
let agentId: string;
let workspace: string;

beforeAll(async () => {
  t = await startTestPlatform(
    { BACKEND_URL: 'http://127.0.0.1:9', REGISTER_RATE_LIMIT: '100000' },
    { driver: Object.assign(createFakeDriver(), { workspace: workspaceOf }), logger: pino({ level: 'info' }, sink) },
  );
  owner = await signUp(t.web);
  const created = await t.backend.inject({
    method: 'POST',
    url: '/api/agents',
    headers: { ...bearer(t), 'x-user-id': owner.id },
    payload: { name: 'no-git' },
  });
  expect(created.statusCode).toBe(201);
  agentId = created.json().id;
  workspace = join(base, 'agents', agentId);
  mkdirSync(join(workspace, 'a', 'b', 'c', 'd', 'e', 'f'), { recursive: true });
  writeFileSync(join(workspace, 'a.txt'), 'ay');
  chmodSync(join(base, 'agents'), 0o755);
  if (sandbox.separateUser) execFileSync('chown', ['-R', `${AGENT_UID}:${AGENT_UID}`, workspace]);
});
afterAll(async () => {
  await t?.close();
  rmSync(base, { recursive: true, force: true });
});
beforeEach(() => {
  lines = [];
});

/** the same call on the web app (the owner's session) and on the backend (its key, acting for the owner) */
const both = async (method: 'GET' | 'POST', route: string, params: Record<string, string> = {}) => {
  const url = `/api/browse/${route}?${new URLSearchParams({ agentId, ...params })}`;
  const payload = method === 'POST' ? {} : undefined;
  return [
    await t.web.inject({ method, url, headers: { cookie: owner.cookie }, ...(payload ? { payload } : {}) }),
    await t.backend.inject({ method, url, headers: { ...bearer(t), 'x-user-id': owner.id }, ...(payload ? { payload } : {}) }),
  ];
};

describe.skipIf(!sandbox.active)('§4.17 git on a workspace that is not a repository', () => {
  it('git-status: 200, isGitRepo false, nothing logged above info', async () => {
    for (const r of await both('GET', 'git-status')) {
      expect(r.statusCode).toBe(200);
      expect(r.json()).toEqual({ ok: true, isGitRepo: false, branch: null, remote: null, changes: [], hasChanges: false });
    }
    expect(lines.filter((l) => (l.level as number) >= 40)).toEqual([]);
  });

  for (const [method, route] of [
    ['GET', 'git-diff'],
    ['POST', 'git-sync'],
  ] as const) {
    it(`${route}: 500 NOT_A_REPOSITORY on both apps, each logged as one warn line without a stack`, async () => {
      for (const r of await both(method, route)) {
        expect(r.statusCode).toBe(500);
        expect(r.json()).toEqual({ error: 'The workspace is not a git repository', code: 'NOT_A_REPOSITORY' });
      }
      const loud = lines.filter((l) => (l.level as number) >= 40);
      expect(loud).toHaveLength(2);
      for (const l of loud) {
        expect(l).toMatchObject({ level: 40, code: 'NOT_A_REPOSITORY', msg: 'The workspace is not a git repository' });
        expect(JSON.stringify(l)).not.toContain('stack');
      }
    });
  }
});

describe('§4.17 caps are clamps: depth above 4 and git-log limit above 100 are served at the cap', () => {
  it('tree depth 5 and 1000 answer as depth 4, on both apps', async () => {
    const [web4] = await both('GET', 'tree', { depth: '4' });
    for (const depth of ['5', '1000']) {
      for (const r of await both('GET', 'tree', { depth })) {
        expect(r.statusCode).toBe(200);
        expect(r.json()).toEqual(web4!.json());
      }
    }
    // four levels below the root: a/b/c/d listed, d not entered
    const d = web4!.json().root.children[0].children[0].children[0].children[0];
    expect(d).toEqual({ type: 'folder', name: 'd', path: 'a/b/c/d' });
    for (const r of await both('GET', 'tree', { depth: '0' })) expect(r.statusCode).toBe(400);
  });

  it.skipIf(!sandbox.active)('git-log limit 101 and 100000 answer 200 (an empty list here), 0 is still 400', async () => {
    for (const limit of ['101', '100000'])
      for (const r of await both('GET', 'git-log', { limit })) expect(r.json()).toEqual({ ok: true, commits: [] });
    for (const r of await both('GET', 'git-log', { limit: '0' })) expect(r.statusCode).toBe(400);
  });
});
