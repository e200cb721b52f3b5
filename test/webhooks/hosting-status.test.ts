/**
 * §6 hosting status webhook (POST /api/webhooks/hosting-status, §4.12) against a local
 * Redis-over-REST server speaking the protocol `@upstash/redis` uses (test/fakes/kv-rest.ts),
 * plus the latest record kept in our database and read back with GET.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import { type FakeKv, startFakeKv } from '../fakes/kv-rest.ts';
import { signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const SECRET = 'hook-secret-123';
const KEY = 'hosting-status:latest';
const SEVEN_DAYS = 7 * 24 * 60 * 60;

let kv: FakeKv;
let secured: TestPlatform; // secret set, KV configured
let open: TestPlatform; // secret set, no KV (`hook` sends the secret unless told otherwise)

beforeAll(async () => {
  kv = await startFakeKv();
  [secured, open] = await Promise.all([
    startTestPlatform({ HOSTING_WEBHOOK_SECRET: SECRET, KV_REST_API_URL: kv.url, KV_REST_API_TOKEN: kv.token }),
    startTestPlatform({ HOSTING_WEBHOOK_SECRET: SECRET }),
  ]);
});
afterAll(async () => {
  await Promise.all([secured?.close(), open?.close()]);
  await kv?.close();
});

const deployment = {
  type: 'deploy',
  deployment: { id: 'dep-1', status: 'SUCCESS', url: 'https://svc.example.com', service: { name: 'agent-api' } },
};
const incident = {
  page: { id: 'p1' },
  incident: {
    name: 'Elevated errors',
    status: 'identified',
    incident_updates: [{ body: 'We found the cause' }, { body: 'We are investigating' }],
  },
};
const component = { page: { id: 'p1' }, component: { name: 'Builds', status: 'degraded_performance' } };

/** `secret` defaults to SECRET; `null` sends none */
const hook = (p: TestPlatform, payload: unknown, opts: { secret?: string | null; query?: string; contentType?: string } = {}) =>
  p.web.inject({
    method: 'POST',
    url: `/api/webhooks/hosting-status${opts.query ?? ''}`,
    headers: {
      'content-type': opts.contentType ?? 'application/json',
      ...(opts.secret === undefined ? { 'x-hosting-secret': SECRET } : opts.secret === null ? {} : { 'x-hosting-secret': opts.secret }),
    },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });

describe('§6 payloads → record', () => {
  it('deployment: status, service name, URL as message, eventType deployment', async () => {
    const res = await hook(open, deployment);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({
      received: true,
      record: {
        status: 'SUCCESS',
        name: 'agent-api',
        message: 'https://svc.example.com',
        eventType: 'deployment',
        receivedAt: expect.any(String),
      },
    });
    expect(Math.abs(Date.parse(body.record.receivedAt) - Date.now())).toBeLessThan(60_000);
  });

  it('incident: status, name, newest update body as message, eventType incident', async () => {
    const res = await hook(open, incident);
    expect(res.json().record).toMatchObject({
      status: 'identified',
      name: 'Elevated errors',
      message: 'We found the cause',
      eventType: 'incident',
    });
  });

  it('component: status, name, eventType component; name defaults to Hosting', async () => {
    expect((await hook(open, component)).json().record).toMatchObject({
      status: 'degraded_performance',
      name: 'Builds',
      eventType: 'component',
    });
    const unnamed = await hook(open, { component: { status: 'major_outage' } });
    expect(unnamed.json().record).toMatchObject({ status: 'major_outage', name: 'Hosting', eventType: 'component', message: null });
    const unnamedIncident = await hook(open, { incident: { status: 'resolved', incident_updates: [] } });
    expect(unnamedIncident.json().record).toMatchObject({ name: 'Hosting', status: 'resolved', message: null, eventType: 'incident' });
  });

  it('any other object: eventType is the payload type', async () => {
    const res = await hook(open, { type: 'service_suspended' });
    expect(res.statusCode).toBe(200);
    expect(res.json().record).toMatchObject({ eventType: 'service_suspended', name: 'Hosting' });
  });

  it('accepts a body sent without application/json (hosting platforms vary)', async () => {
    const res = await hook(open, deployment, { contentType: 'text/plain' });
    expect(res.statusCode).toBe(200);
    expect(res.json().record.eventType).toBe('deployment');
  });
});

describe('§6 invalid JSON → 400 {error:"Invalid payload"}', () => {
  it.each([
    ['malformed JSON', '{"deployment":'],
    ['empty body', ''],
    ['JSON array', '[1,2]'],
    ['JSON string', '"hello"'],
    ['JSON null', 'null'],
    ['JSON number', '42'],
  ])('%s', async (_name, raw) => {
    const res = await hook(open, raw);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'Invalid payload' });
  });

  it('odd content types with bad bodies are 400 too', async () => {
    const res = await hook(open, 'a=b', { contentType: 'application/x-www-form-urlencoded' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'Invalid payload' });
  });
});

describe('§6 webhook secret', () => {
  it('header x-hosting-secret or query ?secret= is accepted', async () => {
    expect((await hook(secured, deployment, { secret: SECRET })).statusCode).toBe(200);
    expect((await hook(secured, deployment, { secret: null, query: `?secret=${SECRET}` })).statusCode).toBe(200);
  });

  it('missing or wrong secret → 401, checked before the payload (bad JSON without a secret is 401)', async () => {
    for (const opts of [
      { secret: null },
      { secret: 'wrong' },
      { secret: '' },
      { secret: null, query: '?secret=wrong' },
      { secret: SECRET.slice(0, -1) },
      { secret: `${SECRET}x` },
    ]) {
      const res = await hook(secured, deployment, opts);
      expect(res.statusCode, JSON.stringify(opts)).toBe(401);
      expect(res.json()).toEqual({ error: 'Unauthorized' });
    }
    expect((await hook(secured, '{bad', { secret: null })).statusCode).toBe(401);
  });

  it('a rejected request stores nothing', async () => {
    const before = kv.commands.length;
    await hook(secured, { deployment: { status: 'FAILED', url: 'https://evil' } }, { secret: 'wrong' });
    expect(kv.commands.length).toBe(before);
    const row = await secured.database.db.kysely.selectFrom('hosting_status').select('message').executeTakeFirst();
    expect(row?.message).not.toBe('https://evil');
  });

  it('when HOSTING_WEBHOOK_SECRET is unset the webhook is closed: 503, nothing stored (docs/security.md)', async () => {
    await withTestPlatform({}, async (unset) => {
      for (const opts of [{ secret: null }, { secret: 'anything' }, { secret: '' }, { secret: null, query: '?secret=' }]) {
        const res = await hook(unset, deployment, opts);
        expect(res.statusCode, JSON.stringify(opts)).toBe(503);
        expect(res.json()).toEqual({ error: 'Hosting status webhook not configured' });
      }
      const row = await unset.database.db.kysely.selectFrom('hosting_status').select('status').executeTakeFirst();
      expect(row).toBeUndefined();
    });
  });
});

describe('§6 / §8 storage: key-value store with a 7-day TTL, and our database', () => {
  it('stores the record under the fixed key with EX 604800 through the Redis REST protocol', async () => {
    const res = await hook(secured, incident, { secret: SECRET });
    const record = res.json().record;
    const set = kv.commands.at(-1)!;
    expect(set[0]!.toUpperCase()).toBe('SET');
    expect(set[1]).toBe(KEY);
    expect(JSON.parse(set[2]!)).toEqual(record);
    expect(set.slice(3).map((s) => s.toUpperCase())).toEqual(['EX', String(SEVEN_DAYS)]);
    const stored = kv.data.get(KEY)!;
    expect(JSON.parse(stored.value)).toEqual(record);
    expect(stored.expiresAt! - Date.now()).toBeGreaterThan((SEVEN_DAYS - 60) * 1000);
    expect(stored.expiresAt! - Date.now()).toBeLessThanOrEqual(SEVEN_DAYS * 1000);
  });

  it('without KV settings the record is returned but not stored in the key-value store', async () => {
    const before = kv.commands.length;
    const res = await hook(open, deployment);
    expect(res.statusCode).toBe(200);
    expect(kv.commands.length).toBe(before);
  });

  it('the latest record is kept in the database (one row) and GET returns it', async () => {
    const u = await signUp(secured.web);
    await hook(secured, deployment, { secret: SECRET });
    const latest = (await hook(secured, component, { secret: SECRET })).json().record;
    const rows = await secured.database.db.kysely.selectFrom('hosting_status').selectAll().execute();
    expect(rows).toHaveLength(1);
    const res = await secured.web.inject({ method: 'GET', url: '/api/webhooks/hosting-status', headers: { cookie: u.cookie } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ record: latest });
  });

  it('GET before any event → {record:null}; GET without a session or with a signed-out one → 401', async () => {
    await withTestPlatform({}, async (fresh) => {
      const u = await signUp(fresh.web);
      const res = await fresh.web.inject({ method: 'GET', url: '/api/webhooks/hosting-status', headers: { cookie: u.cookie } });
      expect(res.json()).toEqual({ record: null });
      expect((await fresh.web.inject({ method: 'GET', url: '/api/webhooks/hosting-status' })).statusCode).toBe(401);
      await fresh.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie } });
      const out = await fresh.web.inject({ method: 'GET', url: '/api/webhooks/hosting-status', headers: { cookie: u.cookie } });
      expect(out.statusCode).toBe(401);
      expect(out.json()).toEqual({ error: 'Unauthorized' });
    });
  });

  it('an unreachable or failing key-value store does not fail the webhook (the database copy is kept)', async () => {
    const dead = await freePort();
    await withTestPlatform(
      { HOSTING_WEBHOOK_SECRET: SECRET, KV_REST_API_URL: `http://127.0.0.1:${dead}`, KV_REST_API_TOKEN: 't', KV_TIMEOUT_MS: '300' },
      async (p) => {
        const started = Date.now();
        const res = await hook(p, deployment);
        expect(res.statusCode).toBe(200);
        expect(Date.now() - started).toBeLessThan(5_000);
        const row = await p.database.db.kysely.selectFrom('hosting_status').select('status').executeTakeFirst();
        expect(row?.status).toBe('SUCCESS');
      },
    );
    kv.failing = true;
    try {
      expect((await hook(secured, deployment, { secret: SECRET })).statusCode).toBe(200);
    } finally {
      kv.failing = false;
    }
  });
});
