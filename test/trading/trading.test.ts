/**
 * §4.5 trading service routes against a local fake trading service (test/fakes/trading.ts):
 * the personal key (encrypted, never returned), key resolution personal → platform → 503
 * needsKey, pass-through, upstream failures as 500/503 and never a hang.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import { type FakeTrading, startFakeTrading } from '../fakes/trading.ts';
import { signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

/** every test signs up fresh users; the per-IP sign-up limit (§4.1) is not under test here */
const MANY_SIGNUPS = { REGISTER_RATE_LIMIT: '100000' };
let fake: FakeTrading;
let t: TestPlatform; // TRADING_API_URL set, no platform key
let withPlatformKey: TestPlatform; // TRADING_API_URL and TRADING_API_KEY set
let unconfigured: TestPlatform; // TRADING_API_URL unset

beforeAll(async () => {
  fake = await startFakeTrading();
  [t, withPlatformKey, unconfigured] = await Promise.all([
    startTestPlatform({ ...MANY_SIGNUPS, TRADING_API_URL: fake.url, TRADING_TIMEOUT_MS: '400' }),
    startTestPlatform({ ...MANY_SIGNUPS, TRADING_API_URL: fake.url, TRADING_API_KEY: 'platform-key', TRADING_TIMEOUT_MS: '400' }),
    startTestPlatform({ ...MANY_SIGNUPS, TRADING_API_KEY: 'platform-key' }),
  ]);
});
afterAll(async () => {
  await Promise.all([t?.close(), withPlatformKey?.close(), unconfigured?.close()]);
  await fake?.close();
});

const saveKey = (p: TestPlatform, cookie: string, apiKey: unknown) =>
  p.web.inject({ method: 'POST', url: '/api/user/trading-key', headers: { cookie }, payload: { apiKey } });

describe('§4.5 personal trading key', () => {
  it('GET is {configured:false} before, {configured:true} after saving; the key itself is never returned', async () => {
    const u = await signUp(t.web);
    const before = await t.web.inject({ method: 'GET', url: '/api/user/trading-key', headers: { cookie: u.cookie } });
    expect(before.statusCode).toBe(200);
    expect(before.json()).toEqual({ configured: false });

    const save = await saveKey(t, u.cookie, 'tk_live_secret_123');
    expect(save.statusCode).toBe(200);
    expect(save.json()).toEqual({ success: true });
    expect(save.body).not.toContain('tk_live_secret_123');

    const after = await t.web.inject({ method: 'GET', url: '/api/user/trading-key', headers: { cookie: u.cookie } });
    expect(after.json()).toEqual({ configured: true });
    expect(after.body).not.toContain('tk_live_secret_123');
  });

  it('POST replaces the existing key (the newest one is used upstream)', async () => {
    const u = await signUp(t.web);
    await saveKey(t, u.cookie, 'first-key');
    await saveKey(t, u.cookie, 'second-key');
    const res = await t.web.inject({ method: 'GET', url: '/api/trading/balances', headers: { cookie: u.cookie } });
    expect(res.statusCode).toBe(200);
    expect(fake.requests.at(-1)!.authorization).toBe('Bearer second-key');
  });

  it('§8: a key of 512 characters is accepted, 513 is 400; empty, blank, missing and non-string are 400', async () => {
    const u = await signUp(t.web);
    expect((await saveKey(t, u.cookie, 'k'.repeat(512))).statusCode).toBe(200);
    for (const bad of ['k'.repeat(513), '', '   ', undefined, 42, null, ['a']]) {
      const res = await saveKey(t, u.cookie, bad);
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(typeof res.json().error).toBe('string');
    }
    expect((await saveKey(t, u.cookie, '')).json()).toEqual({ error: 'API key required' });
    // the failed saves did not replace the stored key
    await t.web.inject({ method: 'GET', url: '/api/trading/balances', headers: { cookie: u.cookie } });
    expect(fake.requests.at(-1)!.authorization).toBe(`Bearer ${'k'.repeat(512)}`);
  });

  it('DELETE removes the key and trading falls back to the platform key', async () => {
    const u = await signUp(withPlatformKey.web);
    await saveKey(withPlatformKey, u.cookie, 'personal-key');
    await withPlatformKey.web.inject({ method: 'GET', url: '/api/trading/balances', headers: { cookie: u.cookie } });
    expect(fake.requests.at(-1)!.authorization).toBe('Bearer personal-key');

    const del = await withPlatformKey.web.inject({ method: 'DELETE', url: '/api/user/trading-key', headers: { cookie: u.cookie } });
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ success: true });
    const status = await withPlatformKey.web.inject({ method: 'GET', url: '/api/user/trading-key', headers: { cookie: u.cookie } });
    expect(status.json()).toEqual({ configured: false });

    const res = await withPlatformKey.web.inject({ method: 'GET', url: '/api/trading/balances', headers: { cookie: u.cookie } });
    expect(res.statusCode).toBe(200);
    expect(fake.requests.at(-1)!.authorization).toBe('Bearer platform-key');
    // deleting again is still a success
    expect(
      (await withPlatformKey.web.inject({ method: 'DELETE', url: '/api/user/trading-key', headers: { cookie: u.cookie } })).statusCode,
    ).toBe(200);
  });

  it("one user's key is never used for, nor visible to, another user", async () => {
    const alice = await signUp(t.web);
    const bob = await signUp(t.web);
    await saveKey(t, alice.cookie, 'alice-key');
    const bobStatus = await t.web.inject({ method: 'GET', url: '/api/user/trading-key', headers: { cookie: bob.cookie } });
    expect(bobStatus.json()).toEqual({ configured: false });
    const bobCall = await t.web.inject({ method: 'GET', url: '/api/trading/balances', headers: { cookie: bob.cookie } });
    expect(bobCall.statusCode).toBe(503);
    expect(bobCall.json()).toMatchObject({ needsKey: true });
    // Bob deleting "his" key leaves Alice's in place
    await t.web.inject({ method: 'DELETE', url: '/api/user/trading-key', headers: { cookie: bob.cookie } });
    const aliceStatus = await t.web.inject({ method: 'GET', url: '/api/user/trading-key', headers: { cookie: alice.cookie } });
    expect(aliceStatus.json()).toEqual({ configured: true });
  });
});

describe('§4.5 trading calls', () => {
  it('GET /api/trading/balances passes the default chains and the upstream body through', async () => {
    const u = await signUp(withPlatformKey.web);
    const res = await withPlatformKey.web.inject({ method: 'GET', url: '/api/trading/balances', headers: { cookie: u.cookie } });
    expect(res.statusCode).toBe(200);
    const req = fake.requests.at(-1)!;
    expect(req.method).toBe('GET');
    expect(req.path).toBe('/balances');
    expect(req.query.get('chains')).toBe('base,polygon,mainnet,solana,unichain');
    expect(res.json()).toEqual({
      key: 'platform-key',
      balances: ['base', 'polygon', 'mainnet', 'solana', 'unichain'].map((chain) => ({ chain, usd: '1.00' })),
    });
  });

  it('GET /api/trading/balances?chains= passes the given list; bad chain names are 400', async () => {
    const u = await signUp(withPlatformKey.web);
    const res = await withPlatformKey.web.inject({
      method: 'GET',
      url: '/api/trading/balances?chains=base, solana',
      headers: { cookie: u.cookie },
    });
    expect(res.statusCode).toBe(200);
    expect(fake.requests.at(-1)!.query.get('chains')).toBe('base,solana');
    const bad = await withPlatformKey.web.inject({
      method: 'GET',
      url: '/api/trading/balances?chains=base,../admin',
      headers: { cookie: u.cookie },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: 'Invalid chains' });
  });

  it('POST /api/trading/prompt sends {prompt, threadId} and passes status and body through', async () => {
    const u = await signUp(withPlatformKey.web);
    const res = await withPlatformKey.web.inject({
      method: 'POST',
      url: '/api/trading/prompt',
      headers: { cookie: u.cookie },
      payload: { prompt: 'buy 1 ETH', threadId: 'th-9' },
    });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ jobId: 'job-1', status: 'queued', echo: { prompt: 'buy 1 ETH', threadId: 'th-9' } });
    const req = fake.requests.at(-1)!;
    expect([req.method, req.path, req.authorization]).toEqual(['POST', '/prompt', 'Bearer platform-key']);

    const noThread = await withPlatformKey.web.inject({
      method: 'POST',
      url: '/api/trading/prompt',
      headers: { cookie: u.cookie },
      payload: { prompt: 'hi' },
    });
    expect(noThread.json().echo).toEqual({ prompt: 'hi' });
  });

  it('POST /api/trading/prompt without a prompt is 400', async () => {
    const u = await signUp(withPlatformKey.web);
    for (const payload of [
      {},
      { prompt: '' },
      { prompt: '  ' },
      { prompt: 5 },
      { prompt: 'x', threadId: 7 },
      { prompt: 'x'.repeat(10_001) },
    ]) {
      const res = await withPlatformKey.web.inject({ method: 'POST', url: '/api/trading/prompt', headers: { cookie: u.cookie }, payload });
      expect(res.statusCode, JSON.stringify(payload).slice(0, 50)).toBe(400);
      expect(typeof res.json().error).toBe('string');
    }
    const missing = await withPlatformKey.web.inject({
      method: 'POST',
      url: '/api/trading/prompt',
      headers: { cookie: u.cookie },
      payload: {},
    });
    expect(missing.json()).toEqual({ error: 'Prompt required' });
  });

  it('GET /api/trading/prompt?jobId= returns the job status; without jobId 400 `jobId required`', async () => {
    const u = await signUp(withPlatformKey.web);
    const res = await withPlatformKey.web.inject({
      method: 'GET',
      url: '/api/trading/prompt?jobId=job-7.a_b%3Ac',
      headers: { cookie: u.cookie },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ jobId: 'job-7.a_b:c', status: 'completed', result: 'bought 1 ETH' });
    expect(fake.requests.at(-1)!.path).toBe('/prompt/job-7.a_b%3Ac');
    for (const url of ['/api/trading/prompt', '/api/trading/prompt?jobId=', '/api/trading/prompt?jobId=%20']) {
      const bad = await withPlatformKey.web.inject({ method: 'GET', url, headers: { cookie: u.cookie } });
      expect(bad.statusCode, url).toBe(400);
      expect(bad.json()).toEqual({ error: 'jobId required' });
    }
  });

  it('a jobId that is not one plain token (`..`, `.`, `/`, `?`, `#`, `%`) is 400 `Invalid jobId` and never reaches the trading service', async () => {
    const u = await signUp(withPlatformKey.web);
    const count = fake.requests.length;
    for (const raw of ['..', '.', '../balances', 'job/7', '..%2F..', 'a?b', 'a#b', '%2e%2e', '.hidden', 'a b', 'é']) {
      const res = await withPlatformKey.web.inject({
        method: 'GET',
        url: `/api/trading/prompt?jobId=${encodeURIComponent(raw)}`,
        headers: { cookie: u.cookie },
      });
      expect(res.statusCode, raw).toBe(400);
      expect(res.json()).toEqual({ error: 'Invalid jobId' });
    }
    // the platform's trading key went nowhere (before the fix `..` reached the upstream root path)
    expect(fake.requests.length).toBe(count);
  });

  it('503 {error, needsKey:true} when neither a personal nor a platform key exists', async () => {
    const u = await signUp(t.web);
    const count = fake.requests.length;
    for (const [method, url, payload] of [
      ['GET', '/api/trading/balances', undefined],
      ['POST', '/api/trading/prompt', { prompt: 'hi' }],
      ['GET', '/api/trading/prompt?jobId=j1', undefined],
    ] as const) {
      const res = await t.web.inject({ method, url, headers: { cookie: u.cookie }, ...(payload ? { payload } : {}) });
      expect(res.statusCode, url).toBe(503);
      expect(res.json().needsKey).toBe(true);
      expect(typeof res.json().error).toBe('string');
    }
    expect(fake.requests.length).toBe(count); // nothing was sent upstream
  });

  it('503 when TRADING_API_URL is unset, even with a key', async () => {
    const u = await signUp(unconfigured.web);
    const res = await unconfigured.web.inject({ method: 'GET', url: '/api/trading/balances', headers: { cookie: u.cookie } });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'Trading service not configured' });
  });
});

describe('§4.5 / §7 upstream failures: 500 or 503 JSON, never a hang', () => {
  const call = async (mode: FakeTrading['mode']) => {
    const u = await signUp(withPlatformKey.web);
    fake.mode = mode;
    try {
      const started = Date.now();
      const res = await withPlatformKey.web.inject({ method: 'GET', url: '/api/trading/balances', headers: { cookie: u.cookie } });
      return { res, ms: Date.now() - started };
    } finally {
      fake.mode = 'ok';
    }
  };

  it('upstream non-2xx → 500 with the upstream status', async () => {
    const { res } = await call('error');
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: 'Trading service error', upstreamStatus: 502 });
    const { res: res401 } = await call('unauthorized');
    expect(res401.statusCode).toBe(500);
    expect(res401.json().upstreamStatus).toBe(401);
  });

  it('upstream invalid JSON → 500', async () => {
    const { res } = await call('invalid-json');
    expect(res.statusCode).toBe(500);
    expect(res.json().error).toBe('Trading service returned an invalid response');
  });

  it('an upstream that never answers → 503 within TRADING_TIMEOUT_MS (400 ms here)', async () => {
    const { res, ms } = await call('hang');
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'Trading service timed out' });
    expect(ms).toBeLessThan(3_000);
  });

  it('an unreachable upstream → 503', async () => {
    const closedPort = await freePort();
    await withTestPlatform({ TRADING_API_URL: `http://127.0.0.1:${closedPort}`, TRADING_API_KEY: 'k' }, async (p) => {
      const u = await signUp(p.web);
      const res = await p.web.inject({
        method: 'POST',
        url: '/api/trading/prompt',
        headers: { cookie: u.cookie },
        payload: { prompt: 'hi' },
      });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ error: 'Trading service unreachable' });
    });
  });
});

describe('§4.5 / §5 security: every route needs a live session', () => {
  const routes = [
    ['GET', '/api/user/trading-key', undefined],
    ['POST', '/api/user/trading-key', { apiKey: 'x' }],
    ['DELETE', '/api/user/trading-key', undefined],
    ['GET', '/api/trading/balances', undefined],
    ['POST', '/api/trading/prompt', { prompt: 'hi' }],
    ['GET', '/api/trading/prompt?jobId=j1', undefined],
    ['GET', '/api/trading/prompt', undefined], // 401 before the 400 for a missing jobId
  ] as const;

  it('no session → 401 {error}', async () => {
    for (const [method, url, payload] of routes) {
      const res = await withPlatformKey.web.inject({ method, url, ...(payload ? { payload } : {}) });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
      expect(res.json()).toEqual({ error: 'Unauthorized' });
    }
  });

  it('a signed-out session → 401, and no upstream call is made', async () => {
    const u = await signUp(withPlatformKey.web);
    await saveKey(withPlatformKey, u.cookie, 'soon-signed-out');
    await withPlatformKey.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie } });
    const count = fake.requests.length;
    for (const [method, url, payload] of routes) {
      const res = await withPlatformKey.web.inject({ method, url, headers: { cookie: u.cookie }, ...(payload ? { payload } : {}) });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
    }
    expect(fake.requests.length).toBe(count);
  });

  it('a malformed body without a session is 401 (auth is checked before the body is parsed)', async () => {
    const res = await withPlatformKey.web.inject({
      method: 'POST',
      url: '/api/user/trading-key',
      headers: { 'content-type': 'application/json' },
      payload: '{"apiKey":',
    });
    expect(res.statusCode).toBe(401);
  });
});

describe('§7 bad input: 4xx JSON {error}, never 5xx', () => {
  it.each([
    ['malformed JSON', 'POST', '/api/user/trading-key', 'application/json', '{"apiKey":'],
    ['JSON array', 'POST', '/api/user/trading-key', 'application/json', '["k"]'],
    ['JSON string', 'POST', '/api/user/trading-key', 'application/json', '"k"'],
    ['wrong type', 'POST', '/api/user/trading-key', 'application/json', '{"apiKey":{"a":1}}'],
    ['empty body', 'POST', '/api/user/trading-key', 'application/json', ''],
    ['wrong content type', 'POST', '/api/user/trading-key', 'text/plain', 'apiKey=x'],
    ['form encoded', 'POST', '/api/trading/prompt', 'application/x-www-form-urlencoded', 'prompt=hi'],
    ['malformed JSON prompt', 'POST', '/api/trading/prompt', 'application/json', '{prompt: hi}'],
    ['prompt array', 'POST', '/api/trading/prompt', 'application/json', '{"prompt":["a"]}'],
    ['repeated jobId', 'GET', '/api/trading/prompt?jobId=a&jobId=b', undefined, undefined],
    ['huge jobId', 'GET', `/api/trading/prompt?jobId=${'j'.repeat(300)}`, undefined, undefined],
    ['repeated chains', 'GET', '/api/trading/balances?chains=a&chains=b', undefined, undefined],
    [
      'too many chains',
      'GET',
      `/api/trading/balances?chains=${Array.from({ length: 30 }, (_, i) => `c${i}`).join(',')}`,
      undefined,
      undefined,
    ],
  ] as const)('%s', async (_name, method, url, contentType, payload) => {
    const u = await signUp(withPlatformKey.web);
    const res = await withPlatformKey.web.inject({
      method,
      url,
      headers: { cookie: u.cookie, ...(contentType ? { 'content-type': contentType } : {}) },
      ...(payload !== undefined ? { payload } : {}),
    });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(typeof res.json().error).toBe('string');
  });
});
