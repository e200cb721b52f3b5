/**
 * §4.13 bridge message bus (header `x-bridge-secret`), §2 "Bridge message", §5 "Bridge secret",
 * §8 "Bridge inbox: default 50, max 100; default window 24 hours".
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BRIDGE_OPERATOR_IDENTITY, type BridgeService } from '../../src/domains/bridge/bridge.service.ts';
import { createBaseApp } from '../../src/http/shared/base-app.ts';
import { createBridgeAuth } from '../../src/http/shared/bridge-auth.ts';
import { mountRoutes } from '../../src/http/shared/routes.ts';
import { bridgeRoutes } from '../../src/http/web/routes/bridge.routes.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const SECRET = 'bridge-test-secret';
const H = { 'x-bridge-secret': SECRET };

type Msg = { id: string; sender: string; channel: string; content: string; priority: string; created_at: string };

function client(t: () => TestPlatform, headers: Record<string, string>) {
  return {
    send: (payload: object) => t().web.inject({ method: 'POST', url: '/api/bridge/send', payload, headers }),
    inbox: (query: Record<string, string> = {}) =>
      t().web.inject({ method: 'GET', url: `/api/bridge/inbox?${new URLSearchParams(query).toString()}`, headers }),
    health: () => t().web.inject({ method: 'GET', url: '/api/bridge/health', headers }),
  };
}

/** Inserts `count` messages directly (fast), oldest first, `ageMs` before now. */
async function seed(t: TestPlatform, count: number, opts: { channel?: string; ageMs?: number; tag?: string } = {}) {
  await sql`insert into bridge_messages (sender, channel, content, created_at)
            select 'atlas-main', ${opts.channel ?? 'general'}, ${opts.tag ?? 'seed'} || '-' || g,
                   clock_timestamp() - make_interval(secs => ${(opts.ageMs ?? 0) / 1000}) + g * interval '1 microsecond'
            from generate_series(1, ${count}) g`.execute(t.database.db.kysely);
}

describe('§4.13 with BRIDGE_SECRET set', () => {
  let t: TestPlatform;
  const api = client(() => t, H);
  beforeAll(async () => {
    t = await startTestPlatform({ BRIDGE_SECRET: SECRET });
  });
  afterAll(() => t?.close());

  describe('auth (§5: constant-time comparison, 401 `{error:"unauthorized"}`)', () => {
    const routes = [
      ['POST', '/api/bridge/send', { sender: 'atlas-main', content: 'hi' }],
      ['GET', '/api/bridge/inbox?reader=x', undefined],
      ['GET', '/api/bridge/health', undefined],
    ] as const;

    it.each([
      ['no header', {}],
      ['wrong secret', { 'x-bridge-secret': 'nope' }],
      ['secret with a suffix', { 'x-bridge-secret': `${SECRET}x` }],
      ['empty secret', { 'x-bridge-secret': '' }],
    ])('%s → 401 on every route', async (_, headers) => {
      for (const [method, url, payload] of routes) {
        const res = await t.web.inject({ method, url, headers, ...(payload ? { payload } : {}) });
        expect(res.statusCode, `${method} ${url}`).toBe(401);
        expect(res.json()).toEqual({ error: 'unauthorized' });
      }
      const count = await t.database.db.kysely
        .selectFrom('bridge_messages')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      expect(count.n).toBe(0);
    });

    it('the secret is checked before the body: bad JSON without the secret → 401', async () => {
      const res = await t.web.inject({
        method: 'POST',
        url: '/api/bridge/send',
        payload: '{',
        headers: { 'content-type': 'application/json' },
      });
      expect(res.statusCode).toBe(401);
    });

    it('the right secret → 200 on every route', async () => {
      for (const [method, url, payload] of routes) {
        const res = await t.web.inject({ method, url, headers: H, ...(payload ? { payload } : {}) });
        expect(res.statusCode, `${method} ${url}`).toBe(200);
      }
    });
  });

  describe('POST /api/bridge/send', () => {
    it('stores a message; defaults channel `general`, priority `normal`; response shape of §4.13', async () => {
      const res = await api.send({ sender: 'atlas-main', content: 'hello bus' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        ok: true,
        message: { id: expect.any(String), sender: 'atlas-main', channel: 'general', priority: 'normal', created_at: expect.any(String) },
      });
      const row = await t.database.db.kysely
        .selectFrom('bridge_messages')
        .selectAll()
        .where('id', '=', res.json().message.id)
        .executeTakeFirstOrThrow();
      expect(row).toMatchObject({ content: 'hello bus', channel: 'general', priority: 'normal' });
    });

    it.each(['atlas-main', 'atlas-service', BRIDGE_OPERATOR_IDENTITY])('sender %s is accepted', async (sender) => {
      const res = await api.send({ sender, content: 'x', channel: 'alerts', priority: 'urgent' });
      expect(res.statusCode).toBe(200);
      expect(res.json().message).toMatchObject({ sender, channel: 'alerts', priority: 'urgent' });
    });

    it.each(['general', 'tasks', 'alerts'])('channel %s is accepted', async (channel) => {
      expect((await api.send({ sender: 'atlas-main', content: 'x', channel })).json().message.channel).toBe(channel);
    });

    it.each(['low', 'normal', 'high', 'urgent'])('priority %s is accepted', async (priority) => {
      expect((await api.send({ sender: 'atlas-main', content: 'x', priority })).json().message.priority).toBe(priority);
    });

    it.each([
      {},
      { sender: 'atlas-main' },
      { content: 'x' },
      { sender: '', content: 'x' },
      { sender: 'atlas-main', content: '' },
      { sender: 'atlas-main', content: '   ' },
      { sender: 5, content: 'x' },
      { sender: 'atlas-main', content: { text: 'x' } },
      { sender: null, content: null },
    ])('%j → 400 `sender and content are required`', async (body) => {
      const res = await api.send(body);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'sender and content are required' });
    });

    it.each(['atlas', 'ATLAS-MAIN', 'root', ' atlas-main'])('sender %j → 400 `invalid sender`', async (sender) => {
      const res = await api.send({ sender, content: 'x' });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'invalid sender' });
    });

    it.each([
      [{ channel: 'random' }, 'invalid channel'],
      [{ channel: 3 }, 'invalid channel'],
      [{ priority: 'critical' }, 'invalid priority'],
      [{ priority: 7 }, 'invalid priority'],
    ])('%j → 400 %s', async (extra, error) => {
      const res = await api.send({ sender: 'atlas-main', content: 'x', ...extra });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error });
    });

    it('content over the bound → 400', async () => {
      const res = await api.send({ sender: 'atlas-main', content: 'x'.repeat(16_001) });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: expect.any(String) });
    });
  });

  describe('GET /api/bridge/inbox', () => {
    it('returns unread messages ascending by creation time, marks them read for the reader', async () => {
      const since = new Date().toISOString();
      const ids: string[] = [];
      for (const content of ['one', 'two', 'three'])
        ids.push((await api.send({ sender: 'atlas-service', content, channel: 'tasks' })).json().message.id);
      await api.send({ sender: 'atlas-service', content: 'elsewhere', channel: 'alerts' });

      const first = await api.inbox({ channel: 'tasks', since, reader: 'worker-1' });
      expect(first.statusCode).toBe(200);
      const body = first.json();
      expect(body).toEqual({ ok: true, channel: 'tasks', count: 3, messages: expect.any(Array) });
      expect(body.messages.map((m: Msg) => m.id)).toEqual(ids);
      expect(body.messages[0]).toEqual({
        id: ids[0],
        sender: 'atlas-service',
        channel: 'tasks',
        content: 'one',
        priority: 'normal',
        created_at: expect.any(String),
      });
      const times = body.messages.map((m: Msg) => m.created_at);
      expect([...times].sort()).toEqual(times);

      // already read by worker-1: excluded
      expect((await api.inbox({ channel: 'tasks', since, reader: 'worker-1' })).json()).toEqual({
        ok: true,
        channel: 'tasks',
        count: 0,
        messages: [],
      });
      // read tracking is per reader
      expect((await api.inbox({ channel: 'tasks', since, reader: 'worker-2' })).json().count).toBe(3);
      // a new message reaches worker-1 alone
      await api.send({ sender: 'atlas-main', content: 'four', channel: 'tasks' });
      expect((await api.inbox({ channel: 'tasks', since, reader: 'worker-1' })).json().messages.map((m: Msg) => m.content)).toEqual([
        'four',
      ]);
    });

    it('reader `unknown` (also the default) peeks without marking anything read', async () => {
      const since = new Date().toISOString();
      await api.send({ sender: 'atlas-main', content: 'peek me', channel: 'alerts' });
      const queries: Record<string, string>[] = [
        { channel: 'alerts', since },
        { channel: 'alerts', since, reader: 'unknown' },
        { channel: 'alerts', since },
      ];
      for (const query of queries) {
        expect((await api.inbox(query)).json().messages.map((m: Msg) => m.content)).toEqual(['peek me']);
      }
      const reads = await t.database.db.kysely.selectFrom('bridge_reads').select('reader').where('reader', '=', 'unknown').execute();
      expect(reads).toHaveLength(0);
      expect((await api.inbox({ channel: 'alerts', since, reader: 'ops' })).json().count).toBe(1);
    });

    it('channel defaults to `general`', async () => {
      const since = new Date().toISOString();
      await api.send({ sender: 'atlas-main', content: 'g' });
      await api.send({ sender: 'atlas-main', content: 't', channel: 'tasks' });
      const body = (await api.inbox({ since })).json();
      expect(body.channel).toBe('general');
      expect(body.messages.map((m: Msg) => m.content)).toEqual(['g']);
    });

    it('`since` defaults to the last 24 hours (§8); an explicit since reaches further back', async () => {
      const reader = 'window-reader';
      await seed(t, 1, { channel: 'alerts', ageMs: 25 * 3600_000, tag: 'old' });
      await seed(t, 1, { channel: 'alerts', ageMs: 23 * 3600_000, tag: 'recent' });
      const peek = (await api.inbox({ channel: 'alerts' })).json().messages.map((m: Msg) => m.content);
      expect(peek).toContain('recent-1');
      expect(peek).not.toContain('old-1');
      const older = new Date(Date.now() - 26 * 3600_000).toISOString();
      const all = (await api.inbox({ channel: 'alerts', since: older, reader })).json().messages.map((m: Msg) => m.content);
      expect(all.slice(0, 2)).toEqual(['old-1', 'recent-1']);
      // epoch milliseconds work as well
      const epoch = (await api.inbox({ channel: 'alerts', since: String(Date.now() - 26 * 3600_000) }))
        .json()
        .messages.map((m: Msg) => m.content);
      expect(epoch).toContain('old-1');
    });

    it('`limit` defaults to 50 and is capped at 100 (§8); the oldest come first', async () => {
      const since = new Date().toISOString();
      await seed(t, 120, { channel: 'tasks', tag: 'bulk' });
      const def = (await api.inbox({ channel: 'tasks', since })).json();
      expect(def.count).toBe(50);
      const capped = (await api.inbox({ channel: 'tasks', since, limit: '1000' })).json();
      expect(capped.count).toBe(100);
      const small = (await api.inbox({ channel: 'tasks', since, limit: '3', reader: 'limited' })).json();
      expect(small.count).toBe(3);
      expect(small.messages.map((m: Msg) => m.id)).toEqual(capped.messages.slice(0, 3).map((m: Msg) => m.id));
      // the next call of that reader continues where the last one stopped
      const next = (await api.inbox({ channel: 'tasks', since, limit: '3', reader: 'limited' })).json();
      expect(next.messages.map((m: Msg) => m.id)).toEqual(capped.messages.slice(3, 6).map((m: Msg) => m.id));
    });

    it.each([
      [{ channel: 'random' }, 'invalid channel'],
      [{ limit: 'abc' }, 'invalid limit'],
      [{ limit: '0' }, 'invalid limit'],
      [{ limit: '-5' }, 'invalid limit'],
      [{ limit: '2.5' }, 'invalid limit'],
      [{ since: 'yesterday' }, 'invalid since'],
      [{ reader: 'r'.repeat(101) }, 'invalid reader'],
    ])('%j → 400 %s', async (query, error) => {
      const res = await api.inbox(query);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error });
    });

    it('concurrency: parallel inbox reads of one reader never return a message twice, and together return all', async () => {
      for (let round = 0; round < 5; round++) {
        const since = new Date().toISOString();
        const channel = 'general';
        const reader = `racer-${round}`;
        await seed(t, 40, { channel, tag: `race${round}` });
        const expected = (await api.inbox({ channel, since, limit: '100' }))
          .json()
          .messages.filter((m: Msg) => m.content.startsWith(`race${round}-`))
          .map((m: Msg) => m.id);
        expect(expected).toHaveLength(40);
        const results = await Promise.all(Array.from({ length: 4 }, () => api.inbox({ channel, since, reader, limit: '100' })));
        const got = results.flatMap((r) => {
          expect(r.statusCode).toBe(200);
          return r.json().messages.map((m: Msg) => m.id) as string[];
        });
        expect(new Set(got).size).toBe(got.length); // never twice
        for (const id of expected) expect(got).toContain(id); // together all
      }
    });

    it('concurrency with small limits: 6 racing readers draining 60 messages 7 at a time see each exactly once', async () => {
      const since = new Date().toISOString();
      await seed(t, 60, { channel: 'alerts', tag: 'drain' });
      const reader = 'drainer';
      const seen: string[] = [];
      for (let i = 0; i < 20; i++) {
        const batch = await Promise.all(Array.from({ length: 6 }, () => api.inbox({ channel: 'alerts', since, reader, limit: '7' })));
        const ids = batch.flatMap(
          (r) =>
            r
              .json()
              .messages.filter((m: Msg) => m.content.startsWith('drain-'))
              .map((m: Msg) => m.id) as string[],
        );
        seen.push(...ids);
        if (batch.every((r) => r.json().count === 0)) break;
      }
      expect(seen).toHaveLength(60);
      expect(new Set(seen).size).toBe(60);
    });
  });

  describe('GET /api/bridge/health', () => {
    it('counts messages and reports the newest (§4.13 shape)', async () => {
      const sent = (await api.send({ sender: BRIDGE_OPERATOR_IDENTITY, content: 'latest', channel: 'tasks' })).json().message;
      const total = await t.database.db.kysely
        .selectFrom('bridge_messages')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      const res = await api.health();
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        status: 'ok',
        total_messages: total.n,
        last_message: { created_at: sent.created_at, sender: BRIDGE_OPERATOR_IDENTITY, channel: 'tasks' },
        channels: ['general', 'tasks', 'alerts'],
        senders: ['atlas-main', 'atlas-service', BRIDGE_OPERATOR_IDENTITY],
        timestamp: expect.any(String),
      });
    });
  });

  describe('bad input → 4xx JSON `{error}`, never 5xx (§7)', () => {
    const cases = [
      { name: 'malformed JSON', payload: '{"sender":', contentType: 'application/json' },
      { name: 'JSON array', payload: '[]', contentType: 'application/json' },
      { name: 'JSON null', payload: 'null', contentType: 'application/json' },
      { name: 'JSON number', payload: '7', contentType: 'application/json' },
      { name: 'empty body', payload: '', contentType: 'application/json' },
      { name: 'form body', payload: 'sender=atlas-main&content=x', contentType: 'application/x-www-form-urlencoded' },
      { name: 'text body', payload: 'hello', contentType: 'text/plain' },
      { name: 'wrong types', payload: '{"sender":["atlas-main"],"content":1,"channel":{},"priority":[]}', contentType: 'application/json' },
    ];
    it.each(cases)('send: $name', async ({ payload, contentType }) => {
      const res = await t.web.inject({ method: 'POST', url: '/api/bridge/send', payload, headers: { ...H, 'content-type': contentType } });
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
      expect(res.json()).toEqual(expect.objectContaining({ error: expect.any(String) }));
    });

    it.each([
      'channel=a&channel=b',
      'limit=1&limit=2',
      'since=%00',
      'reader=a&reader=b',
      `since=${'9'.repeat(80)}`,
      'limit=99999999999999999999',
    ])('inbox: %s', async (query) => {
      const res = await t.web.inject({ method: 'GET', url: `/api/bridge/inbox?${query}`, headers: H });
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
      expect(res.json()).toEqual(expect.objectContaining({ error: expect.any(String) }));
    });
  });
});

describe('§4.13 / §5 with BRIDGE_SECRET unset: the bridge is closed (docs/security.md)', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform({});
  });
  afterAll(() => t?.close());

  it('send, inbox and health answer 503 `Bridge not configured` with or without a header, and nothing is stored', async () => {
    for (const headers of [{}, { 'x-bridge-secret': '' }, { 'x-bridge-secret': 'anything' }] as Record<string, string>[]) {
      const api = client(() => t, headers);
      for (const res of [
        await api.send({ sender: BRIDGE_OPERATOR_IDENTITY, content: 'spoof' }),
        await api.inbox({ reader: 'x' }),
        await api.health(),
      ]) {
        expect(res.statusCode).toBe(503);
        expect(res.json()).toEqual({ error: 'Bridge not configured' });
      }
    }
    const { count } = await t.database.db.kysely
      .selectFrom('bridge_messages')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .executeTakeFirstOrThrow();
    expect(Number(count)).toBe(0);
  });
});

describe('§4.13 health when the store fails → 500 `{status:"error", error}`', () => {
  it('reports the failure as JSON', async () => {
    const app = await createBaseApp({
      title: 't',
      description: 't',
      version: '0',
      logLevel: 'silent',
      bodyLimit: 1_000_000,
      trustProxy: false,
    });
    const failing = {
      health: async () => {
        throw new Error('connection refused');
      },
    } as unknown as BridgeService;
    await mountRoutes(app, { bridge: createBridgeAuth(SECRET) }, [bridgeRoutes({ bridge: failing })]);
    const res = await app.inject({ method: 'GET', url: '/api/bridge/health', headers: H });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ status: 'error', error: expect.any(String) });
    expect(res.body).not.toContain('connection refused');
    await app.close();
  });
});
