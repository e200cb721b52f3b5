/**
 * §4.14 workflows (S, owner-scoped) and §2 "Workflow and node": CRUD, node replacement on PUT,
 * `config`/`position` as JSON-encoded strings, 401 `{workflows:[]}` on the list (§7).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/config/limits.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

type User = Awaited<ReturnType<typeof signUp>>;
let t: TestPlatform;
let alice: User;
let bob: User;

beforeAll(async () => {
  t = await startTestPlatform();
  alice = await signUp(t.web);
  bob = await signUp(t.web);
});
afterAll(() => t?.close());

const req = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, user?: User, payload?: unknown) =>
  t.web.inject({
    method,
    url,
    ...(user ? { headers: { cookie: user.cookie } } : {}),
    ...(payload !== undefined ? { payload: payload as object } : {}),
  });

async function create(user: User, body: object) {
  const res = await req('POST', '/api/workflows', user, body);
  expect(res.statusCode).toBe(201);
  return res.json().workflow as {
    id: string;
    name: string;
    updatedAt: string;
    nodes: { id: string; type: string; config: string; position: string }[];
  };
}

describe('§4.14 POST /api/workflows', () => {
  it('creates a workflow; §2 fields and defaults, node config/position as JSON-encoded strings', async () => {
    const res = await req('POST', '/api/workflows', alice, {
      name: '  Morning digest  ',
      nodes: [
        { type: 'trigger', config: { label: 'Every day', cron: '0 8 * * *' }, position: { x: 10, y: 20 } },
        { type: 'action' },
        { type: 'output', config: { label: 'Send' } },
      ],
    });
    expect(res.statusCode).toBe(201);
    const { workflow } = res.json();
    expect(workflow).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: 'Morning digest',
      description: null,
      enabled: true,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      nodes: [
        { id: expect.any(String), type: 'trigger', config: '{"label":"Every day","cron":"0 8 * * *"}', position: '{"x":10,"y":20}' },
        { id: expect.any(String), type: 'action', config: '{}', position: '{"x":0,"y":0}' },
        { id: expect.any(String), type: 'output', config: '{"label":"Send"}', position: '{"x":0,"y":0}' },
      ],
    });
    expect(new Date(workflow.createdAt).toISOString()).toBe(workflow.createdAt);
    // stored as text exactly as returned
    const rows = await t.database.db.kysely
      .selectFrom('workflow_nodes')
      .select(['config', 'position'])
      .where('workflow_id', '=', workflow.id)
      .execute();
    expect(rows.map((r) => r.config).sort()).toEqual(['{"label":"Every day","cron":"0 8 * * *"}', '{"label":"Send"}', '{}'].sort());
  });

  it('accepts config/position sent back as the JSON-encoded strings GET returns (round trip)', async () => {
    const w = await create(alice, {
      name: 'rt',
      description: 'd',
      nodes: [{ type: 'condition', config: '{"label":"if"}', position: '{"x":1.5,"y":-2}' }],
    });
    expect(w.nodes[0]).toMatchObject({ config: '{"label":"if"}', position: '{"x":1.5,"y":-2}' });
  });

  it.each([
    ['missing', {}],
    ['empty', { name: '' }],
    ['whitespace', { name: '   ' }],
    ['not a string', { name: 42 }],
    ['null', { name: null }],
  ])('name %s → 400 `Name required`', async (_, body) => {
    const res = await req('POST', '/api/workflows', alice, body);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'Name required' });
  });

  it.each([
    ['node type missing', { name: 'x', nodes: [{}] }],
    ['node type unknown', { name: 'x', nodes: [{ type: 'loop' }] }],
    ['config not an object', { name: 'x', nodes: [{ type: 'action', config: [1, 2] }] }],
    ['config a string that is not JSON', { name: 'x', nodes: [{ type: 'action', config: 'nope' }] }],
    ['position not numbers', { name: 'x', nodes: [{ type: 'action', position: { x: 'a', y: 1 } }] }],
    ['nodes not an array', { name: 'x', nodes: { type: 'action' } }],
    ['description not a string', { name: 'x', description: 5 }],
    ['name too long', { name: 'n'.repeat(LIMITS.workflowNameMax + 1) }],
    ['description too long', { name: 'x', description: 'd'.repeat(LIMITS.workflowDescriptionMax + 1) }],
    ['too many nodes', { name: 'x', nodes: Array.from({ length: LIMITS.workflowNodesMax + 1 }, () => ({ type: 'action' })) }],
    ['node config too large', { name: 'x', nodes: [{ type: 'action', config: { blob: 'x'.repeat(LIMITS.workflowNodeConfigMax) } }] }],
  ])('%s → 400 with an error and nothing stored', async (_, body) => {
    const before = await t.database.db.kysely
      .selectFrom('workflows')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    const res = await req('POST', '/api/workflows', alice, body);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: expect.any(String) });
    const after = await t.database.db.kysely
      .selectFrom('workflows')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    expect(after.n).toBe(before.n);
  });

  it('the node limit itself is accepted (§8 bound we set: 100 nodes)', async () => {
    const w = await create(alice, { name: 'big', nodes: Array.from({ length: LIMITS.workflowNodesMax }, () => ({ type: 'action' })) });
    expect(w.nodes).toHaveLength(LIMITS.workflowNodesMax);
  });
});

describe('§4.14 GET /api/workflows', () => {
  it("lists only the caller's workflows, newest update first, each with nodes", async () => {
    const u = await signUp(t.web);
    const a = await create(u, { name: 'A', nodes: [{ type: 'trigger' }] });
    const b = await create(u, { name: 'B' });
    await create(bob, { name: 'bob only' });
    let res = await req('GET', '/api/workflows', u);
    expect(res.statusCode).toBe(200);
    expect(res.json().workflows.map((w: { name: string }) => w.name)).toEqual(['B', 'A']);
    // updating A moves it to the front
    expect((await req('PUT', `/api/workflows/${a.id}`, u, { enabled: false })).statusCode).toBe(200);
    res = await req('GET', '/api/workflows', u);
    const list = res.json().workflows;
    expect(list.map((w: { id: string }) => w.id)).toEqual([a.id, b.id]);
    expect(list[0]).toMatchObject({ name: 'A', enabled: false, nodes: [{ type: 'trigger', config: '{}', position: '{"x":0,"y":0}' }] });
    expect(list[1].nodes).toEqual([]);
  });

  it('a user without workflows gets an empty list', async () => {
    const u = await signUp(t.web);
    const res = await req('GET', '/api/workflows', u);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ workflows: [] });
  });

  it('no session → 401 with body `{workflows:[]}` plus an error (§4.14, §7)', async () => {
    const res = await req('GET', '/api/workflows');
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ workflows: [], error: expect.any(String) });
  });
});

describe('§4.14 GET /api/workflows/:workflowId', () => {
  it('returns the workflow with nodes by creation time, each with createdAt (§2 "on single get")', async () => {
    const types = ['trigger', 'condition', 'action', 'output', 'action'];
    const w = await create(alice, { name: 'ordered', nodes: types.map((type, i) => ({ type, config: { label: `n${i}` } })) });
    const res = await req('GET', `/api/workflows/${w.id}`, alice);
    expect(res.statusCode).toBe(200);
    const nodes = res.json().workflow.nodes;
    expect(nodes.map((n: { config: string }) => JSON.parse(n.config).label)).toEqual(['n0', 'n1', 'n2', 'n3', 'n4']);
    expect(nodes.map((n: { type: string }) => n.type)).toEqual(types);
    for (const n of nodes) expect(new Date(n.createdAt).toISOString()).toBe(n.createdAt);
    const times = nodes.map((n: { createdAt: string }) => n.createdAt);
    expect([...times].sort()).toEqual(times);
  });

  it.each([
    ["another user's workflow", 'own'],
    ['a random id', 'random'],
    ['a malformed id', 'malformed'],
  ] as const)('%s → 404', async (_, kind) => {
    const w = await create(alice, { name: 'private' });
    const target = kind === 'own' ? w.id : kind === 'random' ? randomUUID() : 'not-a-uuid';
    const res = await req('GET', `/api/workflows/${target}`, bob);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: expect.any(String) });
  });
});

describe('§4.14 PUT /api/workflows/:workflowId', () => {
  it('updates fields; when nodes is present all existing nodes are deleted and replaced', async () => {
    const w = await create(alice, { name: 'old', description: 'desc', nodes: [{ type: 'trigger' }, { type: 'action' }] });
    const oldIds = w.nodes.map((n) => n.id);
    const res = await req('PUT', `/api/workflows/${w.id}`, alice, {
      name: 'new',
      description: null,
      enabled: false,
      nodes: [{ type: 'output', config: { label: 'only' }, position: { x: 5, y: 6 } }],
    });
    expect(res.statusCode).toBe(200);
    const { workflow } = res.json();
    expect(workflow).toMatchObject({ id: w.id, name: 'new', description: null, enabled: false });
    expect(workflow.nodes).toEqual([{ id: expect.any(String), type: 'output', config: '{"label":"only"}', position: '{"x":5,"y":6}' }]);
    expect(oldIds).not.toContain(workflow.nodes[0].id);
    expect(new Date(workflow.updatedAt).getTime()).toBeGreaterThan(new Date(w.updatedAt).getTime());
    const stored = await t.database.db.kysely.selectFrom('workflow_nodes').select('id').where('workflow_id', '=', w.id).execute();
    expect(stored.map((r) => r.id)).toEqual([workflow.nodes[0].id]);
  });

  it('without nodes the nodes are kept; nodes: [] removes them all', async () => {
    const w = await create(alice, { name: 'keep', nodes: [{ type: 'trigger' }] });
    let res = await req('PUT', `/api/workflows/${w.id}`, alice, { name: 'renamed' });
    expect(res.json().workflow).toMatchObject({ name: 'renamed', description: null, nodes: [{ id: w.nodes[0]!.id }] });
    res = await req('PUT', `/api/workflows/${w.id}`, alice, { nodes: [] });
    expect(res.json().workflow.nodes).toEqual([]);
  });

  it('invalid input → 400 and the workflow and its nodes are unchanged', async () => {
    const w = await create(alice, { name: 'stable', nodes: [{ type: 'trigger' }] });
    for (const body of [{ name: '' }, { enabled: 'yes' }, { nodes: [{ type: 'bogus' }] }]) {
      const res = await req('PUT', `/api/workflows/${w.id}`, alice, body);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: expect.any(String) });
    }
    const after = (await req('GET', `/api/workflows/${w.id}`, alice)).json().workflow;
    expect(after.name).toBe('stable');
    expect(after.nodes.map((n: { id: string }) => n.id)).toEqual([w.nodes[0]!.id]);
  });

  it('concurrent node replacements never interleave: the result is exactly one submitted set', async () => {
    const w = await create(alice, { name: 'race' });
    const sets = Array.from({ length: 8 }, (_, i) => [0, 1, 2].map((j) => ({ type: 'action', config: { label: `s${i}-${j}` } })));
    const results = await Promise.all(sets.map((nodes) => req('PUT', `/api/workflows/${w.id}`, alice, { nodes })));
    for (const r of results) expect(r.statusCode).toBe(200);
    const final = (await req('GET', `/api/workflows/${w.id}`, alice)).json().workflow.nodes as { config: string }[];
    const labels = final.map((n) => JSON.parse(n.config).label as string);
    expect(labels).toHaveLength(3);
    const set = labels[0]!.split('-')[0];
    expect(labels).toEqual([`${set}-0`, `${set}-1`, `${set}-2`]);
  });

  it("another user's workflow → 404 and it is not modified", async () => {
    const w = await create(alice, { name: 'mine', nodes: [{ type: 'trigger' }] });
    const res = await req('PUT', `/api/workflows/${w.id}`, bob, { name: 'stolen', nodes: [] });
    expect(res.statusCode).toBe(404);
    const after = (await req('GET', `/api/workflows/${w.id}`, alice)).json().workflow;
    expect(after).toMatchObject({ name: 'mine', nodes: [{ id: w.nodes[0]!.id }] });
  });

  it('unknown or malformed id → 404', async () => {
    expect((await req('PUT', `/api/workflows/${randomUUID()}`, alice, { name: 'x' })).statusCode).toBe(404);
    expect((await req('PUT', '/api/workflows/zzz', alice, { name: 'x' })).statusCode).toBe(404);
  });
});

describe('§4.14 DELETE /api/workflows/:workflowId', () => {
  it('deletes the workflow and its nodes → `{deleted:true}`', async () => {
    const w = await create(alice, { name: 'gone', nodes: [{ type: 'trigger' }, { type: 'output' }] });
    const res = await req('DELETE', `/api/workflows/${w.id}`, alice);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ deleted: true });
    expect((await req('GET', `/api/workflows/${w.id}`, alice)).statusCode).toBe(404);
    const nodes = await t.database.db.kysely.selectFrom('workflow_nodes').select('id').where('workflow_id', '=', w.id).execute();
    expect(nodes).toHaveLength(0);
    expect((await req('DELETE', `/api/workflows/${w.id}`, alice)).statusCode).toBe(404);
  });

  it("another user's workflow → 404 and it still exists", async () => {
    const w = await create(alice, { name: 'survives' });
    expect((await req('DELETE', `/api/workflows/${w.id}`, bob)).statusCode).toBe(404);
    expect((await req('GET', `/api/workflows/${w.id}`, alice)).statusCode).toBe(200);
  });
});

describe('§4.14 security: every route needs a live session (§5)', () => {
  const routes = (id: string) =>
    [
      ['GET', '/api/workflows', undefined],
      ['POST', '/api/workflows', { name: 'x' }],
      ['GET', `/api/workflows/${id}`, undefined],
      ['PUT', `/api/workflows/${id}`, { name: 'x' }],
      ['DELETE', `/api/workflows/${id}`, undefined],
    ] as const;

  it('no session → 401 on every route, and nothing changes', async () => {
    const w = await create(alice, { name: 'guarded' });
    for (const [method, url, body] of routes(w.id)) {
      const res = await req(method, url, undefined, body);
      expect(res.statusCode, `${method} ${url}`).toBe(401);
      expect(res.json().error).toEqual(expect.any(String));
    }
    expect((await req('GET', `/api/workflows/${w.id}`, alice)).json().workflow.name).toBe('guarded');
  });

  it('a signed-out session → 401 on every route', async () => {
    const u = await signUp(t.web);
    const w = await create(u, { name: 'soon signed out' });
    await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie } });
    for (const [method, url, body] of routes(w.id)) {
      const res = await req(method, url, u, body);
      expect(res.statusCode, `${method} ${url}`).toBe(401);
    }
  });

  it("row-level security: without user context the tables show no rows; as bob, none of alice's", async () => {
    await create(alice, { name: 'rls', nodes: [{ type: 'trigger' }] });
    const none = await t.database.db.withoutUser(async (trx) => ({
      w: await trx.selectFrom('workflows').select('id').execute(),
      n: await trx.selectFrom('workflow_nodes').select('id').execute(),
    }));
    expect(none).toEqual({ w: [], n: [] });
    const asBob = await t.database.db.withUser(bob.id, (trx) => trx.selectFrom('workflows').select('user_id').execute());
    expect(asBob.every((r) => r.user_id === bob.id)).toBe(true);
  });
});

describe('bad input on every workflows route → 4xx JSON `{error}`, never 5xx (§7)', () => {
  const cases: { name: string; method: 'POST' | 'PUT'; payload: string; contentType: string }[] = [
    { name: 'malformed JSON', method: 'POST', payload: '{"name": ', contentType: 'application/json' },
    { name: 'JSON array body', method: 'POST', payload: '[1,2]', contentType: 'application/json' },
    { name: 'JSON string body', method: 'POST', payload: '"hi"', contentType: 'application/json' },
    { name: 'wrong content type', method: 'POST', payload: 'name=x', contentType: 'application/x-www-form-urlencoded' },
    { name: 'text body', method: 'POST', payload: 'name', contentType: 'text/plain' },
    { name: 'empty JSON body', method: 'POST', payload: '', contentType: 'application/json' },
    { name: 'PUT malformed JSON', method: 'PUT', payload: '{', contentType: 'application/json' },
    { name: 'PUT wrong types', method: 'PUT', payload: '{"name":[],"enabled":"no","nodes":"x"}', contentType: 'application/json' },
    { name: 'PUT wrong content type', method: 'PUT', payload: 'x', contentType: 'text/plain' },
    { name: 'PUT null node', method: 'PUT', payload: '{"nodes":[null]}', contentType: 'application/json' },
    { name: 'POST null body', method: 'POST', payload: 'null', contentType: 'application/json' },
  ];
  let id: string;
  beforeAll(async () => {
    id = (await create(alice, { name: 'target' })).id;
  });

  it.each(cases)('$name', async ({ method, payload, contentType }) => {
    const url = method === 'POST' ? '/api/workflows' : `/api/workflows/${id}`;
    const res = await t.web.inject({ method, url, payload, headers: { cookie: alice.cookie, 'content-type': contentType } });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(res.json()).toEqual(expect.objectContaining({ error: expect.any(String) }));
  });
});

describe('OpenAPI documents the routes of §4.12–§4.14 (docs/architecture.md "Adding a domain and an endpoint": tags, summary, description)', () => {
  it('/docs/json lists workflows, heartbeat and bridge routes with tags and descriptions', async () => {
    const res = await t.web.inject({ method: 'GET', url: '/docs/json' });
    expect(res.statusCode).toBe(200);
    const paths = res.json().paths as Record<string, Record<string, { tags?: string[]; summary?: string; description?: string }>>;
    const expected: [string, string, string][] = [
      ['/api/workflows', 'get', 'workflows'],
      ['/api/workflows', 'post', 'workflows'],
      ['/api/workflows/{workflowId}', 'get', 'workflows'],
      ['/api/workflows/{workflowId}', 'put', 'workflows'],
      ['/api/workflows/{workflowId}', 'delete', 'workflows'],
      ['/api/heartbeat', 'get', 'heartbeat'],
      ['/api/heartbeat', 'post', 'heartbeat'],
      ['/api/heartbeat', 'delete', 'heartbeat'],
      ['/api/bridge/send', 'post', 'bridge'],
      ['/api/bridge/inbox', 'get', 'bridge'],
      ['/api/bridge/health', 'get', 'bridge'],
    ];
    for (const [path, method, tag] of expected) {
      const op = paths[path]?.[method];
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op!.tags).toEqual([tag]);
      expect(op!.summary).toEqual(expect.any(String));
      expect(op!.description).toEqual(expect.any(String));
    }
  });
});
