/**
 * §2 "API key", §4.3 API keys (web, session), the backend POST /api/validate-key (bearer key, §5),
 * docs/architecture.md rule 6 (stored only as SHA-256 with a lookup prefix).
 */

import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const BEARER = { authorization: 'Bearer test-internal-key' };
const KEY_FORMAT = /^sk_[A-Za-z0-9_-]{40}$/;

let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform({
    ADMIN_EMAILS: 'keyadmin@example.com',
    ADMIN_EMAILS_REQUIRE_VERIFIED: 'false',
    REGISTER_RATE_LIMIT: '100000',
  });
});
afterAll(() => t?.close());

const createKey = async (cookie: string, name = 'my key') => {
  const res = await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie }, payload: { name } });
  expect(res.statusCode).toBe(201);
  return res.json() as { id: string; name: string; key: string; createdAt: string };
};
const validateBackend = (payload: unknown, headers: Record<string, string> = BEARER) =>
  t.backend.inject({ method: 'POST', url: '/api/validate-key', headers, payload: payload as object });

describe('§4.3 POST /api/keys', () => {
  it('201 {id,name,key,createdAt}; the key is sk_ plus 40 random characters and shown once', async () => {
    const u = await signUp(t.web);
    const res = await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie: u.cookie }, payload: { name: '  CI deploy  ' } });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    // §4.3's fields, and the key as GET /api/keys/:id answers it (docs/payments.md "API keys")
    expect(Object.keys(body)).toEqual(expect.arrayContaining(['createdAt', 'id', 'key', 'name']));
    expect(body).toMatchObject({ agentIds: null, monthlyBudgetUsd: null, rateLimitPerMinute: null, expiresAt: null, expired: false });
    expect(body.name).toBe('CI deploy');
    expect(body.key).toMatch(KEY_FORMAT);
    expect(Number.isNaN(Date.parse(body.createdAt))).toBe(false);
    // never again: list and get show only the preview
    const list = await t.web.inject({ method: 'GET', url: '/api/keys', headers: { cookie: u.cookie } });
    expect(list.body).not.toContain(body.key);
    const { key: _secret, ...summary } = body;
    expect(list.json().keys).toEqual([{ ...summary, id: body.id, name: 'CI deploy', keyPreview: body.key.slice(0, 10), lastUsed: null }]);
  });

  it('two keys never share a value (CSPRNG)', async () => {
    const u = await signUp(t.web);
    const keys = await Promise.all(Array.from({ length: 10 }, () => createKey(u.cookie)));
    expect(new Set(keys.map((k) => k.key)).size).toBe(10);
  });

  it.each([
    ['missing', {}, 'Name required'],
    ['empty', { name: '' }, 'Name required'],
    ['blank', { name: '    ' }, 'Name required'],
    ['65 characters', { name: 'x'.repeat(65) }, 'Name must be at most 64 characters'],
    ['a number', { name: 42 }, 'Name must be a string'],
    ['null', { name: null }, 'Name must be a string'],
  ])('400 when the name is %s (§8 max 64)', async (_label, payload, error) => {
    const u = await signUp(t.web);
    const res = await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie: u.cookie }, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error });
    expect((await t.web.inject({ method: 'GET', url: '/api/keys', headers: { cookie: u.cookie } })).json().keys).toEqual([]);
  });

  it('a 64-character name is accepted', async () => {
    const u = await signUp(t.web);
    expect((await createKey(u.cookie, 'n'.repeat(64))).name).toHaveLength(64);
  });
});

describe('§4.3 GET /api/keys, GET and DELETE /api/keys/:id', () => {
  it('lists only my keys, newest first', async () => {
    const a = await signUp(t.web);
    const b = await signUp(t.web);
    const k1 = await createKey(a.cookie, 'first');
    const k2 = await createKey(a.cookie, 'second');
    await createKey(b.cookie, 'bob');
    const res = await t.web.inject({ method: 'GET', url: '/api/keys', headers: { cookie: a.cookie } });
    expect(res.statusCode).toBe(200);
    expect(res.json().keys.map((k: { id: string }) => k.id)).toEqual([k2.id, k1.id]);
  });

  it('GET one: {id,name,keyPreview,createdAt,lastUsed}', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie, 'one');
    const res = await t.web.inject({ method: 'GET', url: `/api/keys/${k.id}`, headers: { cookie: u.cookie } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id: k.id, name: 'one', keyPreview: k.key.slice(0, 10), createdAt: k.createdAt, lastUsed: null });
  });

  it("404 for another user's key on GET and DELETE (owner only), and the key survives", async () => {
    const a = await signUp(t.web);
    const b = await signUp(t.web);
    const k = await createKey(a.cookie);
    const g = await t.web.inject({ method: 'GET', url: `/api/keys/${k.id}`, headers: { cookie: b.cookie } });
    expect(g.statusCode).toBe(404);
    expect(typeof g.json().error).toBe('string');
    const d = await t.web.inject({ method: 'DELETE', url: `/api/keys/${k.id}`, headers: { cookie: b.cookie } });
    expect(d.statusCode).toBe(404);
    expect((await validateBackend({ apiKey: k.key })).statusCode).toBe(200);
  });

  it.each(['00000000-0000-4000-8000-000000000000', 'not-a-uuid', "1' or '1'='1"])('404 for unknown id %s', async (id) => {
    const u = await signUp(t.web);
    for (const method of ['GET', 'DELETE'] as const) {
      const res = await t.web.inject({ method, url: `/api/keys/${encodeURIComponent(id)}`, headers: { cookie: u.cookie } });
      expect(res.statusCode).toBe(404);
      expect(typeof res.json().error).toBe('string');
    }
  });

  it('DELETE → {success:true}; the key is gone and no longer validates', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    const res = await t.web.inject({ method: 'DELETE', url: `/api/keys/${k.id}`, headers: { cookie: u.cookie } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect((await t.web.inject({ method: 'GET', url: `/api/keys/${k.id}`, headers: { cookie: u.cookie } })).statusCode).toBe(404);
    expect((await t.web.inject({ method: 'DELETE', url: `/api/keys/${k.id}`, headers: { cookie: u.cookie } })).statusCode).toBe(404);
    const v = await validateBackend({ apiKey: k.key });
    expect(v.statusCode).toBe(401);
    expect(v.json()).toEqual({ valid: false, error: 'Invalid API key' });
  });
});

describe('backend POST /api/validate-key (§4.3 flow, §4.18 shape)', () => {
  it('returns the owner profile {valid,userId,email,plan,subscriptionStatus,features[]} and updates lastUsed', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    const before = Date.now();
    const res = await validateBackend({ apiKey: k.key });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({
      valid: true,
      userId: u.id,
      email: u.email,
      plan: 'solo',
      subscriptionStatus: 'none',
      features: expect.any(Array),
    });
    expect(body.features).toContain('messaging_tools');
    expect(body.features).not.toContain('coding_tools');
    const got = (await t.web.inject({ method: 'GET', url: `/api/keys/${k.id}`, headers: { cookie: u.cookie } })).json();
    expect(got.lastUsed).not.toBeNull();
    expect(Date.parse(got.lastUsed)).toBeGreaterThanOrEqual(before - 5_000);
  });

  it('features follow the plan (collective and above: coding tools; network: all models) and admins get network level', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    await t.database.db.kysely
      .updateTable('users')
      .set({ plan: 'collective', subscription_status: 'active' })
      .where('id', '=', u.id)
      .execute();
    const c = (await validateBackend({ apiKey: k.key })).json();
    expect(c).toMatchObject({ plan: 'collective', subscriptionStatus: 'active' });
    expect(c.features).toContain('coding_tools');
    expect(c.features).not.toContain('all_models');
    const admin = await signUp(t.web, { email: 'keyadmin@example.com' });
    const ak = await createKey(admin.cookie);
    const a = (await validateBackend({ apiKey: ak.key })).json();
    expect(a.plan).toBe('solo');
    expect(a.features).toContain('all_models');
  });

  it('a key differing in one character after the prefix is invalid (the hash is compared, not the prefix)', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    const last = k.key.at(-1) === 'A' ? 'B' : 'A';
    const res = await validateBackend({ apiKey: k.key.slice(0, -1) + last });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ valid: false, error: 'Invalid API key' });
    expect((await validateBackend({ apiKey: k.key.slice(0, 10) })).statusCode).toBe(401);
    expect((await validateBackend({ apiKey: `${k.key}x` })).statusCode).toBe(401);
  });

  it('several keys sharing a lookup prefix: the one whose hash matches wins', async () => {
    const a = await signUp(t.web);
    const b = await signUp(t.web);
    const k = await createKey(b.cookie);
    // a colliding prefix owned by someone else, inserted directly
    const decoy = k.key.slice(0, 10) + 'z'.repeat(33);
    await t.database.db.kysely
      .insertInto('api_keys')
      .values({ user_id: a.id, name: 'decoy', prefix: k.key.slice(0, 10), key_hash: createHash('sha256').update(decoy).digest() })
      .execute();
    expect((await validateBackend({ apiKey: k.key })).json().userId).toBe(b.id);
    expect((await validateBackend({ apiKey: decoy })).json().userId).toBe(a.id);
  });

  it.each([
    ['missing apiKey', {}, 'API key required'],
    ['empty apiKey', { apiKey: '' }, 'API key required'],
    ['not sk_', { apiKey: 'pk_abcdefghijklmnop' }, 'API key must start with sk_'],
    ['a number', { apiKey: 123 }, 'API key must be a string'],
  ])('400 for %s', async (_label, payload, error) => {
    const res = await validateBackend(payload);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error });
  });

  it('an unknown or absurdly long sk_ key → 401 {valid:false,error}', async () => {
    for (const apiKey of ['sk_unknownunknownunknown', `sk_${'a'.repeat(5000)}`]) {
      const res = await validateBackend({ apiKey });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ valid: false, error: 'Invalid API key' });
    }
  });

  it('§5 bearer key: none → 401 Unauthorized, wrong → 403 Forbidden, and nothing is validated', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    const none = await validateBackend({ apiKey: k.key }, {});
    expect(none.statusCode).toBe(401);
    expect(none.json()).toEqual({ error: 'Unauthorized' });
    const noPrefix = await validateBackend({ apiKey: k.key }, { authorization: 'test-internal-key' });
    expect(noPrefix.statusCode).toBe(401);
    const wrong = await validateBackend({ apiKey: k.key }, { authorization: 'Bearer nope' });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.json()).toEqual({ error: 'Forbidden' });
    // a user's own sk_ key is not the backend bearer key
    expect((await validateBackend({ apiKey: k.key }, { authorization: `Bearer ${k.key}` })).statusCode).toBe(403);
    const got = (await t.web.inject({ method: 'GET', url: `/api/keys/${k.id}`, headers: { cookie: u.cookie } })).json();
    expect(got.lastUsed).toBeNull();
  });

  it('§5 500 Server misconfigured when INTERNAL_API_KEY is unset', async () => {
    await withTestPlatform({ INTERNAL_API_KEY: '' }, async (p) => {
      const res = await p.backend.inject({ method: 'POST', url: '/api/validate-key', headers: BEARER, payload: { apiKey: 'sk_x' } });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ error: 'Server misconfigured' });
    });
  });
});

describe('§4.3 POST /api/keys/validate (web)', () => {
  it('with a session: the same flow and profile as the backend endpoint', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/keys/validate',
      headers: { cookie: u.cookie },
      payload: { apiKey: k.key },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ valid: true, userId: u.id, email: u.email, plan: 'solo' });
    const bad = await t.web.inject({
      method: 'POST',
      url: '/api/keys/validate',
      headers: { cookie: u.cookie },
      payload: { apiKey: 'sk_nope' },
    });
    expect(bad.statusCode).toBe(401);
    expect(bad.json()).toEqual({ valid: false, error: 'Invalid API key' });
    const notSk = await t.web.inject({
      method: 'POST',
      url: '/api/keys/validate',
      headers: { cookie: u.cookie },
      payload: { apiKey: 'abc' },
    });
    expect(notSk.statusCode).toBe(400);
  });
});

describe('§4.3 security: sessions', () => {
  const routes = (id: string) =>
    [
      ['GET', '/api/keys', undefined],
      ['POST', '/api/keys', { name: 'x' }],
      ['GET', `/api/keys/${id}`, undefined],
      ['DELETE', `/api/keys/${id}`, undefined],
      ['POST', '/api/keys/validate', { apiKey: 'sk_whatever' }],
    ] as const;

  it('no session → 401 on every route, even with a bad body', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    for (const [method, url, payload] of routes(k.id)) {
      const res = await t.web.inject({ method, url, ...(payload ? { payload } : {}) });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
      expect(res.json().error).toBe('Unauthorized');
    }
    expect((await t.web.inject({ method: 'POST', url: '/api/keys', payload: { name: 5 } })).statusCode).toBe(401);
    expect((await t.web.inject({ method: 'GET', url: `/api/keys/${k.id}`, headers: { cookie: u.cookie } })).statusCode).toBe(200);
  });

  it('signed-out session → 401 on every route; the key is untouched', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie } });
    for (const [method, url, payload] of routes(k.id)) {
      const res = await t.web.inject({ method, url, headers: { cookie: u.cookie }, ...(payload ? { payload } : {}) });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
    }
    expect((await validateBackend({ apiKey: k.key })).statusCode).toBe(200);
  });

  it('row-level security: api_keys rows are invisible without user context and to other users', async () => {
    const a = await signUp(t.web);
    const b = await signUp(t.web);
    await createKey(a.cookie);
    expect(await t.database.db.withoutUser((trx) => trx.selectFrom('api_keys').select('id').execute())).toEqual([]);
    expect(
      await t.database.db.withUser(b.id, (trx) => trx.selectFrom('api_keys').select('id').where('user_id', '=', a.id).execute()),
    ).toEqual([]);
  });
});

describe('bad input: 4xx JSON {error}, never 5xx', () => {
  const cases: { name: string; app: 'web' | 'backend'; url: string; payload: string; type?: string }[] = [
    { name: 'create: malformed JSON', app: 'web', url: '/api/keys', payload: '{"name":' },
    { name: 'create: body is an array', app: 'web', url: '/api/keys', payload: '["x"]' },
    { name: 'create: body is a string', app: 'web', url: '/api/keys', payload: '"x"' },
    { name: 'create: form content type', app: 'web', url: '/api/keys', payload: 'name=x', type: 'application/x-www-form-urlencoded' },
    { name: 'create: text/plain', app: 'web', url: '/api/keys', payload: '{"name":"x"}', type: 'text/plain' },
    { name: 'create: empty body', app: 'web', url: '/api/keys', payload: '' },
    { name: 'web validate: malformed JSON', app: 'web', url: '/api/keys/validate', payload: '{' },
    { name: 'web validate: apiKey object', app: 'web', url: '/api/keys/validate', payload: '{"apiKey":{"a":1}}' },
    { name: 'backend validate: malformed JSON', app: 'backend', url: '/api/validate-key', payload: '{apiKey' },
    { name: 'backend validate: body array', app: 'backend', url: '/api/validate-key', payload: '[]' },
    {
      name: 'backend validate: form content type',
      app: 'backend',
      url: '/api/validate-key',
      payload: 'apiKey=sk_x',
      type: 'application/x-www-form-urlencoded',
    },
    { name: 'backend validate: apiKey null', app: 'backend', url: '/api/validate-key', payload: '{"apiKey":null}' },
  ];
  it.each(cases)('$name', async ({ app, url, payload, type }) => {
    const headers: Record<string, string> = { 'content-type': type ?? 'application/json' };
    if (app === 'web') headers.cookie = (await signUp(t.web)).cookie;
    else Object.assign(headers, BEARER);
    const res = await (app === 'web' ? t.web : t.backend).inject({ method: 'POST', url, headers, payload });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(typeof res.json().error).toBe('string');
  });
});

describe('docs/architecture.md rule 6: no plaintext API key in the database', () => {
  it('no row of any table contains a raw key or its secret part; the stored hash is its SHA-256', async () => {
    const u = await signUp(t.web);
    const keys = await Promise.all([createKey(u.cookie, 'a'), createKey(u.cookie, 'b')]);
    await validateBackend({ apiKey: keys[0]!.key }); // a use must not store it either
    const db = t.database.db.kysely;
    const tables = await sql<{ tablename: string }>`select tablename from pg_tables where schemaname = 'public'`.execute(db);
    let dump = '';
    for (const { tablename } of tables.rows) {
      const rows = await sql<{ j: string }>`select row_to_json(x)::text as j from ${sql.table(tablename)} x`.execute(db);
      dump += rows.rows.map((r) => r.j).join('\n');
    }
    expect(dump).toContain(keys[0]!.key.slice(0, 10)); // the dump really covers api_keys
    for (const { key } of keys) {
      expect(dump).not.toContain(key);
      expect(dump).not.toContain(key.slice(10)); // nor the secret part alone
      expect(dump).not.toContain(Buffer.from(key).toString('hex'));
      expect(dump).not.toContain(Buffer.from(key).toString('base64'));
    }
    const row = await db.selectFrom('api_keys').select('key_hash').where('id', '=', keys[1]!.id).executeTakeFirstOrThrow();
    expect(row.key_hash.equals(createHash('sha256').update(keys[1]!.key).digest())).toBe(true);
  });
});

describe('OpenAPI', () => {
  it('the web document lists the §4.2 and §4.3 routes with tags, summaries and descriptions', async () => {
    const res = await t.web.inject({ method: 'GET', url: '/docs/json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    const expected: [string, string][] = [
      ['/api/config', 'get'],
      ['/api/config', 'post'],
      ['/api/config', 'put'],
      ['/api/keys', 'get'],
      ['/api/keys', 'post'],
      ['/api/keys/validate', 'post'],
      ['/api/keys/{id}', 'get'],
      ['/api/keys/{id}', 'delete'],
    ];
    for (const [path, method] of expected) {
      const op = doc.paths[path]?.[method];
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op.tags.length).toBeGreaterThan(0);
      expect(op.summary.length).toBeGreaterThan(0);
      expect(op.description.length).toBeGreaterThan(0);
    }
  });
});

describe('verified keys are cached (docs/configuration.md API_KEY_CACHE_TTL_MS) without weakening revocation', () => {
  it('a deleted key stops validating at once, even right after a cached validation', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    for (let i = 0; i < 3; i++) expect((await validateBackend({ apiKey: k.key })).statusCode).toBe(200);
    expect((await t.web.inject({ method: 'DELETE', url: `/api/keys/${k.id}`, headers: { cookie: u.cookie } })).statusCode).toBe(200);
    const v = await validateBackend({ apiKey: k.key });
    expect(v.statusCode).toBe(401);
    expect(v.json()).toEqual({ valid: false, error: 'Invalid API key' });
  });

  it('lastUsed is written by the first use in a minute, not by every request', async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    expect((await validateBackend({ apiKey: k.key })).statusCode).toBe(200);
    const lastUsed = async () =>
      (
        await t.database.db.kysely.selectFrom('api_keys').select('last_used_at').where('id', '=', k.id).executeTakeFirstOrThrow()
      ).last_used_at!.getTime();
    const first = await lastUsed();
    for (let i = 0; i < 5; i++) expect((await validateBackend({ apiKey: k.key })).statusCode).toBe(200);
    expect(await lastUsed()).toBe(first);
  });

  it("an admin's plan change shows in the next validation (the key's cached profile is evicted with the user's sessions)", async () => {
    const u = await signUp(t.web);
    const k = await createKey(u.cookie);
    expect((await validateBackend({ apiKey: k.key })).json().plan).toBe('solo');
    await t.platform.services.admin.updateUser({ id: '00000000-0000-0000-0000-000000000000', isAdmin: true }, u.id, { plan: 'label' });
    expect((await validateBackend({ apiKey: k.key })).json().plan).toBe('label');
  });
});
