/**
 * §4.12 GET/POST/DELETE /api/heartbeat and §2 "Heartbeat settings (per agent)": defaults `3h`,
 * enabled, nulls; frequency `<n>m|h|d`; nextHeartbeat = save time + frequency; ownership by the
 * agents table or the user's runtime instance id.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseFrequency } from '../../src/domains/heartbeat/heartbeat.service.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

type User = Awaited<ReturnType<typeof signUp>>;
let t: TestPlatform;
let alice: User;
let bob: User;
let n = 0;

const DEFAULTS = { frequency: '3h', enabled: true, lastHeartbeat: null, nextHeartbeat: null };

/** An agents row owned by `user` (the §4.12 ownership source), inserted on the owner connection. */
async function addAgent(user: User): Promise<string> {
  const id = `hb-agent-${Date.now().toString(36)}-${n++}`;
  await sql`insert into agents (id, user_id, name, subdomain, url)
            values (${id}, ${user.id}, 'Agent', ${id}, ${`https://${id}.agents.localhost`})`.execute(t.database.db.kysely);
  return id;
}

beforeAll(async () => {
  t = await startTestPlatform();
  alice = await signUp(t.web);
  bob = await signUp(t.web);
});
afterAll(() => t?.close());

const get = (user: User | undefined, query: string) =>
  t.web.inject({ method: 'GET', url: `/api/heartbeat${query}`, ...(user ? { headers: { cookie: user.cookie } } : {}) });
const post = (user: User | undefined, payload: object) =>
  t.web.inject({ method: 'POST', url: '/api/heartbeat', payload, ...(user ? { headers: { cookie: user.cookie } } : {}) });
const del = (user: User | undefined, opts: { query?: string; payload?: object } = {}) =>
  t.web.inject({
    method: 'DELETE',
    url: `/api/heartbeat${opts.query ?? ''}`,
    ...(opts.payload ? { payload: opts.payload } : {}),
    ...(user ? { headers: { cookie: user.cookie } } : {}),
  });

describe('§4.12 GET /api/heartbeat', () => {
  it('defaults when nothing is saved: 3h, enabled, null times', async () => {
    const agent = await addAgent(alice);
    const res = await get(alice, `?agentId=${agent}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ heartbeat: DEFAULTS });
  });

  it.each(['', '?agentId=', '?agentId=%20%20', '?other=x'])('agentId missing (%s) → 400 `agentId required`', async (q) => {
    const res = await get(alice, q);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'agentId required' });
  });

  it("another user's saved settings are never shown: bob sees the defaults for alice's agent", async () => {
    const agent = await addAgent(alice);
    expect((await post(alice, { agentId: agent, frequency: '15m', enabled: false })).statusCode).toBe(200);
    const res = await get(bob, `?agentId=${agent}`);
    expect(res.json()).toEqual({ heartbeat: DEFAULTS });
  });
});

describe('§4.12 POST /api/heartbeat', () => {
  it('saves for an agent of the agents table: lastHeartbeat = save time, nextHeartbeat = + frequency', async () => {
    const agent = await addAgent(alice);
    const before = Date.now();
    const res = await post(alice, { agentId: agent, frequency: '30m', enabled: false });
    const after = Date.now();
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({
      success: true,
      heartbeat: {
        agentId: agent,
        frequency: '30m',
        enabled: false,
        lastHeartbeat: expect.any(String),
        nextHeartbeat: expect.any(String),
        lastUpdated: expect.any(String),
      },
    });
    const last = Date.parse(body.heartbeat.lastHeartbeat);
    expect(last).toBeGreaterThanOrEqual(before);
    expect(last).toBeLessThanOrEqual(after);
    expect(Date.parse(body.heartbeat.nextHeartbeat) - last).toBe(30 * 60_000);
    expect(body.heartbeat.lastUpdated).toBe(body.heartbeat.lastHeartbeat);
    // and GET reads it back
    const read = await get(alice, `?agentId=${agent}`);
    expect(read.json()).toEqual({
      heartbeat: {
        frequency: '30m',
        enabled: false,
        lastHeartbeat: body.heartbeat.lastHeartbeat,
        nextHeartbeat: body.heartbeat.nextHeartbeat,
      },
    });
  });

  it('omitted frequency and enabled take the defaults 3h and true (§4.12), also on an update', async () => {
    const agent = await addAgent(alice);
    await post(alice, { agentId: agent, frequency: '1d', enabled: false });
    const res = await post(alice, { agentId: agent });
    expect(res.statusCode).toBe(200);
    const hb = res.json().heartbeat;
    expect(hb).toMatchObject({ frequency: '3h', enabled: true });
    expect(Date.parse(hb.nextHeartbeat) - Date.parse(hb.lastHeartbeat)).toBe(3 * 3600_000);
    const rows = await t.database.db.kysely.selectFrom('heartbeat_settings').select('frequency').where('agent_id', '=', agent).execute();
    expect(rows).toEqual([{ frequency: '3h' }]); // one row per (user, agent): an update, not a second row
  });

  it("ownership passes for the user's runtime instance id (not an agents row)", async () => {
    const u = await signUp(t.web);
    const runtimeId = `runtime-${u.id.slice(0, 8)}`;
    await t.database.db.kysely.updateTable('users').set({ runtime_instance_id: runtimeId }).where('id', '=', u.id).execute();
    const res = await post(u, { agentId: runtimeId, frequency: '2d' });
    expect(res.statusCode).toBe(200);
    expect(Date.parse(res.json().heartbeat.nextHeartbeat) - Date.parse(res.json().heartbeat.lastHeartbeat)).toBe(2 * 86_400_000);
    // someone else's runtime instance id is not theirs
    expect((await post(bob, { agentId: runtimeId })).statusCode).toBe(404);
  });

  it("another user's agent or an unknown agent → 404 and nothing is stored", async () => {
    const agent = await addAgent(alice);
    for (const agentId of [agent, 'no-such-agent']) {
      const res = await post(bob, { agentId, frequency: '1h' });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: expect.any(String) });
    }
    const rows = await t.database.db.kysely.selectFrom('heartbeat_settings').select('user_id').where('user_id', '=', bob.id).execute();
    expect(rows).toHaveLength(0);
  });

  it.each([{}, { agentId: '' }, { agentId: '   ' }, { agentId: 42 }, { agentId: null }, { frequency: '1h' }])(
    'agentId missing or not a string %j → 400 `agentId required`',
    async (body) => {
      const res = await post(alice, body);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'agentId required' });
    },
  );

  it.each(['1m', '59m', '3h', '24h', '30d', '720h', '43200m'])('frequency %s is accepted', async (frequency) => {
    const agent = await addAgent(alice);
    const res = await post(alice, { agentId: agent, frequency });
    expect(res.statusCode).toBe(200);
    const hb = res.json().heartbeat;
    expect(Date.parse(hb.nextHeartbeat) - Date.parse(hb.lastHeartbeat)).toBe(parseFrequency(frequency));
  });

  it.each(['0m', '0h', '-1h', '3', 'h', '3w', '1.5h', '3H', ' 3h', '31d', '721h', '43201m', '', '9999999d', 5, true, null, ['3h']])(
    'frequency %j → 400',
    async (frequency) => {
      const agent = await addAgent(alice);
      const res = await post(alice, { agentId: agent, frequency });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: expect.stringMatching(/frequency/i) });
    },
  );

  it('enabled must be a boolean → 400', async () => {
    const agent = await addAgent(alice);
    const res = await post(alice, { agentId: agent, enabled: 'yes' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: expect.any(String) });
  });
});

describe('§4.12 DELETE /api/heartbeat', () => {
  it('removes the saved settings (body agentId) → `{success:true}`; defaults apply again', async () => {
    const agent = await addAgent(alice);
    await post(alice, { agentId: agent, frequency: '5m' });
    const res = await del(alice, { payload: { agentId: agent } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect((await get(alice, `?agentId=${agent}`)).json()).toEqual({ heartbeat: DEFAULTS });
  });

  it('accepts agentId in the query string too, and is idempotent', async () => {
    const agent = await addAgent(alice);
    await post(alice, { agentId: agent, frequency: '5m' });
    expect((await del(alice, { query: `?agentId=${agent}` })).json()).toEqual({ success: true });
    expect((await del(alice, { query: `?agentId=${agent}` })).json()).toEqual({ success: true });
    expect((await get(alice, `?agentId=${agent}`)).json()).toEqual({ heartbeat: DEFAULTS });
  });

  it("another user's delete leaves the owner's settings in place", async () => {
    const agent = await addAgent(alice);
    await post(alice, { agentId: agent, frequency: '7h' });
    expect((await del(bob, { payload: { agentId: agent } })).statusCode).toBe(200);
    expect((await get(alice, `?agentId=${agent}`)).json().heartbeat.frequency).toBe('7h');
  });

  it('agentId missing → 400 `agentId required`', async () => {
    for (const opts of [{}, { payload: {} }, { payload: { agentId: 7 } }, { query: '?agentId=' }]) {
      const res = await del(alice, opts);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'agentId required' });
    }
  });
});

describe('§4.12 security (§5 session)', () => {
  it('no session → 401 on GET, POST and DELETE', async () => {
    const agent = await addAgent(alice);
    await post(alice, { agentId: agent, frequency: '9h' });
    for (const res of [
      await get(undefined, `?agentId=${agent}`),
      await post(undefined, { agentId: agent }),
      await del(undefined, { payload: { agentId: agent } }),
    ]) {
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: expect.any(String) });
    }
    expect((await get(alice, `?agentId=${agent}`)).json().heartbeat.frequency).toBe('9h');
  });

  it('a signed-out session → 401', async () => {
    const u = await signUp(t.web);
    const agent = await addAgent(u);
    await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie } });
    expect((await get(u, `?agentId=${agent}`)).statusCode).toBe(401);
    expect((await post(u, { agentId: agent })).statusCode).toBe(401);
    expect((await del(u, { payload: { agentId: agent } })).statusCode).toBe(401);
  });

  it('row-level security: without user context no heartbeat rows are visible', async () => {
    const agent = await addAgent(alice);
    await post(alice, { agentId: agent });
    const rows = await t.database.db.withoutUser((trx) => trx.selectFrom('heartbeat_settings').selectAll().execute());
    expect(rows).toHaveLength(0);
    const all = await t.database.db.kysely.selectFrom('heartbeat_settings').select('agent_id').execute();
    expect(all.length).toBeGreaterThan(0);
  });
});

describe('bad input on every heartbeat route → 4xx JSON `{error}`, never 5xx (§7)', () => {
  const cases: { name: string; method: 'POST' | 'DELETE' | 'GET'; url?: string; payload?: string; contentType?: string }[] = [
    { name: 'POST malformed JSON', method: 'POST', payload: '{"agentId":', contentType: 'application/json' },
    { name: 'POST array body', method: 'POST', payload: '["a"]', contentType: 'application/json' },
    { name: 'POST null body', method: 'POST', payload: 'null', contentType: 'application/json' },
    { name: 'POST wrong content type', method: 'POST', payload: 'agentId=a', contentType: 'application/x-www-form-urlencoded' },
    { name: 'POST wrong types', method: 'POST', payload: '{"agentId":{},"frequency":[],"enabled":1}', contentType: 'application/json' },
    { name: 'POST empty body', method: 'POST', payload: '', contentType: 'application/json' },
    {
      name: 'POST very long agentId',
      method: 'POST',
      payload: JSON.stringify({ agentId: 'a'.repeat(5000) }),
      contentType: 'application/json',
    },
    { name: 'DELETE malformed JSON', method: 'DELETE', payload: '{', contentType: 'application/json' },
    { name: 'DELETE wrong content type', method: 'DELETE', payload: 'x', contentType: 'text/plain' },
    { name: 'GET repeated agentId', method: 'GET', url: '/api/heartbeat?agentId=a&agentId=b' },
    { name: 'GET very long agentId', method: 'GET', url: `/api/heartbeat?agentId=${'a'.repeat(5000)}` },
  ];
  it.each(cases)('$name', async ({ method, url, payload, contentType }) => {
    const res = await t.web.inject({
      method,
      url: url ?? '/api/heartbeat',
      ...(payload !== undefined ? { payload } : {}),
      headers: { cookie: alice.cookie, ...(contentType ? { 'content-type': contentType } : {}) },
    });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(res.json()).toEqual(expect.objectContaining({ error: expect.any(String) }));
  });
});
