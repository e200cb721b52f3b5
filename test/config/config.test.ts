/**
 * §2 "Agent configuration and backup", §4.2 GET/POST/PUT /api/config, §8 "Config backups kept: 10".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform({ ADMIN_EMAILS: 'boss@example.com', ADMIN_EMAILS_REQUIRE_VERIFIED: 'false', REGISTER_RATE_LIMIT: '100000' });
});
afterAll(() => t?.close());

const get = (cookie?: string) => t.web.inject({ method: 'GET', url: '/api/config', headers: cookie ? { cookie } : {} });
const save = (cookie: string | undefined, payload: unknown) =>
  t.web.inject({ method: 'POST', url: '/api/config', headers: cookie ? { cookie } : {}, payload: payload as object });
const restore = (cookie: string | undefined, payload: unknown) =>
  t.web.inject({ method: 'PUT', url: '/api/config', headers: cookie ? { cookie } : {}, payload: payload as object });
const setPlan = (userId: string, plan: 'solo' | 'collective' | 'label' | 'network') =>
  t.database.db.kysely.updateTable('users').set({ plan }).where('id', '=', userId).execute();

describe('§4.2 GET /api/config: default configuration', () => {
  it('returns the §2 default shape with tools.profile messaging for solo and no backups', async () => {
    const u = await signUp(t.web);
    const res = await get(u.cookie);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.backups).toEqual([]);
    const c = body.config;
    expect(c.logging.level).toBe('info');
    expect(typeof c.agents.defaults.model).toBe('string');
    expect(c.agents.defaults.model).toMatch(/^[^/]+\/.+$/); // §2 model ids are <vendor>/<model>
    expect(typeof c.agents.defaults.workspace).toBe('string');
    expect(c.tools.profile).toBe('messaging');
    expect(c.gateway).toEqual({ bind: 'lan', auth: { mode: 'token' } });
    expect(c.channels.whatsapp.allowFrom).toEqual([]);
    expect(c.channels.telegram.enabled).toBe(false);
    expect(c.channels.discord.enabled).toBe(false);
    expect(c.channels.webchat.enabled).toBe(true);
    expect(c.session.dmScope).toBe('per-channel-peer');
    expect(c.session.resetTriggers).toHaveLength(2);
    expect(c.skills.install.nodeManager).toBe('npm');
  });

  it.each(['collective', 'label', 'network'] as const)('tools.profile is coding for %s (§2 "collective and above")', async (plan) => {
    const u = await signUp(t.web);
    await setPlan(u.id, plan);
    expect((await get(u.cookie)).json().config.tools.profile).toBe('coding');
  });

  it('admins get network-level access (§2 Plans): coding on a solo plan', async () => {
    const u = await signUp(t.web, { email: 'boss@example.com' });
    expect((await get(u.cookie)).json().config.tools.profile).toBe('coding');
  });
});

describe('§4.2 POST /api/config: save with backup', () => {
  it('the first save backs up the default as bkp_initial and returns {success, config, backupId, backups}', async () => {
    const u = await signUp(t.web);
    const before = (await get(u.cookie)).json().config;
    const res = await save(u.cookie, { config: { tools: { profile: 'coding' }, custom: [1, 'two', null] } });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.success).toBe(true);
    expect(body.config).toEqual({ tools: { profile: 'coding' }, custom: [1, 'two', null] });
    expect(body.backupId).toBe('bkp_initial');
    expect(body.backups).toHaveLength(1);
    expect(body.backups[0].id).toBe('bkp_initial');
    expect(Object.keys(body.backups[0]).sort()).toEqual(['id', 'timestamp']); // §2 lists show only id and timestamp
    expect(Number.isNaN(Date.parse(body.backups[0].timestamp))).toBe(false);
    const after = (await get(u.cookie)).json();
    expect(after.config).toEqual(body.config);
    // restoring bkp_initial gives the default back
    const r = await restore(u.cookie, { backupId: 'bkp_initial' });
    expect(r.json().config).toEqual(before);
  });

  it('later saves get bkp_<epoch_ms> ids, newest first, each holding the configuration it replaced', async () => {
    const u = await signUp(t.web);
    await save(u.cookie, { config: { v: 1 } });
    const t0 = Date.now();
    const second = (await save(u.cookie, { config: { v: 2 } })).json();
    expect(second.backupId).toMatch(/^bkp_\d+$/);
    expect(Math.abs(Number(second.backupId.slice(4)) - t0)).toBeLessThan(60_000);
    const third = (await save(u.cookie, { config: { v: 3 } })).json();
    expect(third.backups.map((b: { id: string }) => b.id)).toEqual([third.backupId, second.backupId, 'bkp_initial']);
    const restored = (await restore(u.cookie, { backupId: second.backupId })).json();
    expect(restored.config).toEqual({ v: 1 });
  });

  it(`keeps at most 10 backups and drops the oldest (§8)`, async () => {
    const u = await signUp(t.web);
    const ids: string[] = [];
    for (let i = 0; i < 13; i++) ids.push((await save(u.cookie, { config: { i } })).json().backupId);
    const backups = (await get(u.cookie)).json().backups.map((b: { id: string }) => b.id);
    expect(backups).toHaveLength(10);
    expect(backups).toEqual(ids.slice(-10).reverse());
    expect(backups).not.toContain('bkp_initial');
    const rows = await t.database.db.kysely.selectFrom('config_backups').select('id').where('user_id', '=', u.id).execute();
    expect(rows).toHaveLength(10);
  });

  it('backup ids are unique even when saves fall within one millisecond', async () => {
    const frozen = new Date();
    await withTestPlatform({}, { now: () => frozen }, async (p) => {
      const u = await signUp(p.web);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await p.web.inject({ method: 'POST', url: '/api/config', headers: { cookie: u.cookie }, payload: { config: { i } } });
        expect(res.statusCode).toBe(200);
        ids.push(res.json().backupId);
      }
      expect(new Set(ids).size).toBe(5);
      expect(ids.slice(1)).toEqual([1, 2, 3, 4].map((k) => `bkp_${frozen.getTime() + k - 1}`));
    });
  });

  it('20 parallel saves leave exactly 10 backups and the last committed configuration', async () => {
    const u = await signUp(t.web);
    await save(u.cookie, { config: { seed: true } }); // past bkp_initial, so every id below is bkp_<ms>
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => save(u.cookie, { config: { n: i } })));
    for (const r of results) expect(r.statusCode).toBe(200);
    const bodies = results.map((r) => r.json() as { backupId: string; config: { n: number } });
    const ids = bodies.map((b) => b.backupId);
    expect(new Set(ids).size).toBe(20);
    // ids increase in commit order (each save runs under the per-user lock): the highest id is the last commit
    const byCommit = [...bodies].sort((a, b) => Number(a.backupId.slice(4)) - Number(b.backupId.slice(4)));
    const last = byCommit.at(-1)!;
    const final = (await get(u.cookie)).json();
    expect(final.config).toEqual(last.config);
    expect(final.backups).toHaveLength(10);
    expect(final.backups.map((b: { id: string }) => b.id)).toEqual(
      byCommit
        .slice(-10)
        .map((b) => b.backupId)
        .reverse(),
    );
    // and the newest backup holds the configuration the last save replaced
    const previous = byCommit.at(-2)!;
    const r = await restore(u.cookie, { backupId: last.backupId });
    expect(r.json().config).toEqual(previous.config);
  });
});

describe('§4.2 PUT /api/config: restore', () => {
  it('backs up the current configuration, then restores: {success, config, restoredFrom, backups}', async () => {
    const u = await signUp(t.web);
    await save(u.cookie, { config: { name: 'A' } });
    const b = (await save(u.cookie, { config: { name: 'B' } })).json(); // backup of A
    const res = await restore(u.cookie, { backupId: b.backupId });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ success: true, config: { name: 'A' }, restoredFrom: b.backupId });
    expect(body.backups).toHaveLength(3);
    expect(body.backups[0].id).toBe(body.backupId);
    expect((await get(u.cookie)).json().config).toEqual({ name: 'A' });
    // the backup made by the restore holds B
    expect((await restore(u.cookie, { backupId: body.backupId })).json().config).toEqual({ name: 'B' });
  });

  it('404 Backup not found for an unknown id, and nothing changes', async () => {
    const u = await signUp(t.web);
    await save(u.cookie, { config: { keep: 1 } });
    const res = await restore(u.cookie, { backupId: 'bkp_123' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: 'Backup not found' });
    const after = (await get(u.cookie)).json();
    expect(after.config).toEqual({ keep: 1 });
    expect(after.backups).toHaveLength(1);
  });

  it("404 for another user's backup id (it is not theirs to restore)", async () => {
    const a = await signUp(t.web);
    const b = await signUp(t.web);
    await save(a.cookie, { config: { secret: 'a' } });
    const aId = (await save(a.cookie, { config: { secret: 'a2' } })).json().backupId;
    const res = await restore(b.cookie, { backupId: aId });
    expect(res.statusCode).toBe(404);
    expect((await get(b.cookie)).json().config.secret).toBeUndefined();
    expect((await get(a.cookie)).json().config).toEqual({ secret: 'a2' });
  });

  it('400 when backupId is missing or not a string', async () => {
    const u = await signUp(t.web);
    for (const payload of [{}, { backupId: '' }, { backupId: 5 }, { backupId: null }]) {
      const res = await restore(u.cookie, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error).toMatch(/^(Missing backupId|Invalid backupId: must be a string)$/);
    }
  });
});

describe('§4.2 bad input: 400 JSON, never 5xx', () => {
  const deep = (n: number) => {
    let v: unknown = 1;
    for (let i = 0; i < n; i++) v = { v };
    return v;
  };
  const cases: { name: string; method: 'POST' | 'PUT'; payload: string; type?: string; error?: RegExp }[] = [
    { name: 'config missing', method: 'POST', payload: '{}', error: /^Config is required$/ },
    { name: 'config is an array', method: 'POST', payload: '{"config":[1,2]}', error: /^Config must be a JSON object$/ },
    { name: 'config is a string', method: 'POST', payload: '{"config":"x"}', error: /^Config must be a JSON object$/ },
    { name: 'config is null', method: 'POST', payload: '{"config":null}', error: /^Config must be a JSON object$/ },
    { name: 'config is a number', method: 'POST', payload: '{"config":5}' },
    { name: 'body is an array', method: 'POST', payload: '[1]' },
    { name: 'body is a JSON string', method: 'POST', payload: '"config"' },
    { name: 'malformed JSON', method: 'POST', payload: '{"config": {', error: /not valid JSON/ },
    { name: 'empty JSON body', method: 'POST', payload: '' },
    { name: 'NUL character (jsonb cannot store it)', method: 'POST', payload: '{"config":{"a":"x\\u0000y"}}', error: /not serializable/ },
    { name: 'NUL in a key', method: 'POST', payload: '{"config":{"a\\u0000":1}}', error: /not serializable/ },
    { name: 'unpaired surrogate', method: 'POST', payload: '{"config":{"a":"\\ud800"}}', error: /not serializable/ },
    { name: 'nested too deep', method: 'POST', payload: JSON.stringify({ config: deep(200) }), error: /not serializable/ },
    { name: 'wrong content type', method: 'POST', payload: 'config=1', type: 'application/x-www-form-urlencoded' },
    { name: 'text/plain body', method: 'POST', payload: '{"config":{}}', type: 'text/plain' },
    { name: 'PUT malformed JSON', method: 'PUT', payload: '{backupId', error: /not valid JSON/ },
    { name: 'PUT body array', method: 'PUT', payload: '["bkp_initial"]' },
  ];
  it.each(cases)('$name → 400 {error}', async ({ method, payload, type, error }) => {
    const u = await signUp(t.web);
    const res = await t.web.inject({
      method,
      url: '/api/config',
      headers: { cookie: u.cookie, 'content-type': type ?? 'application/json' },
      payload,
    });
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(typeof body.error).toBe('string');
    if (error) expect(body.error).toMatch(error);
    // nothing was saved
    expect((await get(u.cookie)).json().backups).toEqual([]);
  });

  it('a configuration nested 60 deep is accepted (the cap is 64)', async () => {
    const u = await signUp(t.web);
    const res = await save(u.cookie, { config: deep(59) as object });
    expect(res.statusCode).toBe(200);
  });
});

describe('§4.2 / §5 security', () => {
  it.each([
    ['GET', undefined],
    ['POST', { config: { a: 1 } }],
    ['PUT', { backupId: 'bkp_initial' }],
  ] as const)('%s without a session → 401', async (method, payload) => {
    const res = await t.web.inject({ method, url: '/api/config', ...(payload ? { payload } : {}) });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });

  it('without a session, a bad body still gets 401 (auth is checked first)', async () => {
    const res = await t.web.inject({ method: 'POST', url: '/api/config', payload: { config: 'nope' } });
    expect(res.statusCode).toBe(401);
  });

  it('a signed-out session → 401 on every method', async () => {
    const u = await signUp(t.web);
    await save(u.cookie, { config: { x: 1 } });
    await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie } });
    expect((await get(u.cookie)).statusCode).toBe(401);
    expect((await save(u.cookie, { config: { x: 2 } })).statusCode).toBe(401);
    expect((await restore(u.cookie, { backupId: 'bkp_initial' })).statusCode).toBe(401);
    const row = await t.database.db.kysely
      .selectFrom('agent_configs')
      .select('config')
      .where('user_id', '=', u.id)
      .executeTakeFirstOrThrow();
    expect(row.config).toEqual({ x: 1 });
  });

  it("one user's configuration is invisible to another", async () => {
    const a = await signUp(t.web);
    const b = await signUp(t.web);
    await save(a.cookie, { config: { owner: 'a' } });
    const bView = (await get(b.cookie)).json();
    expect(bView.config.owner).toBeUndefined();
    expect(bView.backups).toEqual([]);
  });

  it('row-level security: without user context no configuration or backup rows are visible', async () => {
    const u = await signUp(t.web);
    await save(u.cookie, { config: { rls: true } });
    const seen = await t.database.db.withoutUser(async (trx) => ({
      configs: await trx.selectFrom('agent_configs').selectAll().execute(),
      backups: await trx.selectFrom('config_backups').selectAll().execute(),
    }));
    expect(seen).toEqual({ configs: [], backups: [] });
    const other = await signUp(t.web);
    const asOther = await t.database.db.withUser(other.id, (trx) =>
      trx.selectFrom('config_backups').select('id').where('user_id', '=', u.id).execute(),
    );
    expect(asOther).toEqual([]);
  });
});

describe('§4.2 channel secrets (docs/security.md "Secrets at rest")', () => {
  const TOKEN = '123456789:AAH-telegram-bot-token-secret-9xyz';
  const stored = async (userId: string) => {
    const cfg = await t.database.db.kysely
      .selectFrom('agent_configs')
      .select('config')
      .where('user_id', '=', userId)
      .executeTakeFirstOrThrow();
    const backups = await t.database.db.kysely.selectFrom('config_backups').select('config').where('user_id', '=', userId).execute();
    return JSON.stringify([cfg.config, backups.map((b) => b.config)]);
  };

  it('a bot token is sealed in the configuration and its backups, masked in every answer, kept by a masked round trip', async () => {
    const u = await signUp(t.web);
    const first = await save(u.cookie, { config: { channels: { telegram: { enabled: true, botToken: TOKEN } } } });
    expect(first.statusCode).toBe(200);
    expect(first.json().config.channels.telegram.botToken).toBe('••••9xyz');
    expect(await stored(u.id)).not.toContain(TOKEN);
    expect(await stored(u.id)).toContain('$sealed');

    const read = (await get(u.cookie)).json().config;
    expect(read.channels.telegram.botToken).toBe('••••9xyz');
    // saving back what GET showed keeps the secret (still sealed, same last 4), and a backup holds it sealed
    read.logging = { level: 'debug' };
    const second = await save(u.cookie, { config: read });
    expect(second.json().config.channels.telegram.botToken).toBe('••••9xyz');
    const all = await stored(u.id);
    expect(all).not.toContain(TOKEN);
    expect(all).not.toContain('••••');
    // restoring the backup answers masked too
    const restored = await restore(u.cookie, { backupId: second.json().backupId });
    expect(restored.statusCode).toBe(200);
    expect(restored.json().config.channels.telegram.botToken).toBe('••••9xyz');
    expect(JSON.stringify(restored.json())).not.toContain(TOKEN);
  });

  it('a client cannot plant a sealed blob of its own', async () => {
    const u = await signUp(t.web);
    const res = await save(u.cookie, { config: { channels: { telegram: { botToken: { $sealed: 'v1.forged' } } } } });
    expect(res.statusCode).toBe(200);
    expect(await stored(u.id)).not.toContain('forged');
  });
});
