/**
 * §4.1 POST /api/register is "bot-detection protected" (403) and rate limited (429).
 * Bot detection runs against a local server speaking the Turnstile siteverify protocol
 * (docs/configuration.md TURNSTILE_SECRET_KEY / TURNSTILE_VERIFY_URL); the limit is REGISTER_RATE_LIMIT per IP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeSiteverify, startFakeSiteverify } from '../fakes/siteverify.ts';
import { startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

let n = 0;
const freshEmail = () => `bot${Date.now().toString(36)}${n++}@example.com`;

describe('§4.1 register bot detection → 403', () => {
  const SECRET = 'turnstile-test-secret';
  let fake: FakeSiteverify;
  let t: TestPlatform;
  const register = (payload: object, headers: Record<string, string> = {}) =>
    t.web.inject({ method: 'POST', url: '/api/register', payload, headers });

  beforeAll(async () => {
    fake = await startFakeSiteverify({ secret: SECRET, validTokens: ['human-token'] });
    t = await startTestPlatform({ TURNSTILE_SECRET_KEY: SECRET, TURNSTILE_VERIFY_URL: fake.url, REGISTER_RATE_LIMIT: '1000' });
  });
  afterAll(async () => {
    await t.close();
    await fake.close();
  });

  it('no token → 403 with a JSON error, and no user is created', async () => {
    const email = freshEmail();
    const res = await register({ email, password: 'Tr1cky-horse-battery' });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ error: expect.any(String) });
    const rows = await t.database.db.kysely.selectFrom('users').select('id').where('email', '=', email).execute();
    expect(rows).toHaveLength(0);
  });

  it('a token the verifier rejects → 403', async () => {
    const before = fake.calls.length;
    const res = await register({ email: freshEmail(), password: 'Tr1cky-horse-battery', turnstileToken: 'robot-token' });
    expect(res.statusCode).toBe(403);
    // the server really asked siteverify, with the configured secret and the token (form POST)
    const call = fake.calls[before]!;
    expect(call).toMatchObject({ secret: SECRET, response: 'robot-token', remoteip: '127.0.0.1' });
    expect(call.contentType).toMatch(/application\/x-www-form-urlencoded/);
  });

  it('an accepted token in the body field `turnstileToken` → 201', async () => {
    const res = await register({ email: freshEmail(), password: 'Tr1cky-horse-battery', turnstileToken: 'human-token' });
    expect(res.statusCode).toBe(201);
  });

  it('an accepted token in the header `cf-turnstile-response` → 201', async () => {
    const before = fake.calls.length;
    const res = await register({ email: freshEmail(), password: 'Tr1cky-horse-battery' }, { 'cf-turnstile-response': 'human-token' });
    expect(res.statusCode).toBe(201);
    expect(fake.calls[before]?.response).toBe('human-token');
  });

  it('a rejected token in the header → 403', async () => {
    const res = await register({ email: freshEmail(), password: 'Tr1cky-horse-battery' }, { 'cf-turnstile-response': 'robot-token' });
    expect(res.statusCode).toBe(403);
  });

  it('an unreachable verifier fails closed → 403, never 5xx', async () => {
    const dead = await startFakeSiteverify({ secret: SECRET });
    const url = dead.url;
    await dead.close();
    await withTestPlatform({ TURNSTILE_SECRET_KEY: SECRET, TURNSTILE_VERIFY_URL: url }, async (t2) => {
      const res = await t2.web.inject({
        method: 'POST',
        url: '/api/register',
        payload: { email: freshEmail(), password: 'Tr1cky-horse-battery', turnstileToken: 'human-token' },
      });
      expect(res.statusCode).toBe(403);
    });
  });

  it('without TURNSTILE_SECRET_KEY bot detection is off: no token needed (docs/configuration.md)', async () => {
    const t2 = await startTestPlatform({ TURNSTILE_VERIFY_URL: fake.url });
    const before = fake.calls.length;
    try {
      const res = await t2.web.inject({
        method: 'POST',
        url: '/api/register',
        payload: { email: freshEmail(), password: 'Tr1cky-horse-battery' },
      });
      expect(res.statusCode).toBe(201);
      expect(fake.calls.length).toBe(before);
    } finally {
      await t2.close();
    }
  });
});

describe('§4.1 register per-IP sign-up limit → 429 (REGISTER_RATE_LIMIT)', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform({ REGISTER_RATE_LIMIT: '2', TRUST_PROXY: 'true' });
  });
  afterAll(() => t.close());

  const register = (ip: string) =>
    t.web.inject({
      method: 'POST',
      url: '/api/register',
      payload: { email: freshEmail(), password: 'Tr1cky-horse-battery' },
      headers: { 'x-forwarded-for': ip },
    });

  it('allows REGISTER_RATE_LIMIT sign-ups per IP, then answers 429 with a JSON error', async () => {
    expect((await register('203.0.113.7')).statusCode).toBe(201);
    expect((await register('203.0.113.7')).statusCode).toBe(201);
    const res = await register('203.0.113.7');
    expect(res.statusCode).toBe(429);
    expect(res.json()).toMatchObject({ error: expect.any(String) });
    // still limited on the next try
    expect((await register('203.0.113.7')).statusCode).toBe(429);
  });

  it('the limit is per IP: another address can still sign up', async () => {
    expect((await register('198.51.100.9')).statusCode).toBe(201);
  });
});

describe('TRUST_PROXY trusts exactly the configured proxies: X-Forwarded-For from anyone else is ignored (docs/security.md)', () => {
  const registerVia = (t: TestPlatform, remoteAddress: string, xff: string) =>
    t.web.inject({
      method: 'POST',
      url: '/api/register',
      payload: { email: freshEmail(), password: 'Tr1cky-horse-battery' },
      headers: { 'x-forwarded-for': xff },
      remoteAddress,
    });

  it('TRUST_PROXY=true: a client that is not a loopback proxy cannot pick its IP by rotating X-Forwarded-For', async () => {
    const t = await startTestPlatform({ REGISTER_RATE_LIMIT: '2', TRUST_PROXY: 'true' });
    try {
      const codes: number[] = [];
      for (let i = 1; i <= 4; i++) codes.push((await registerVia(t, '203.0.113.50', `192.0.2.${i}`)).statusCode);
      expect(codes).toEqual([201, 201, 429, 429]);
    } finally {
      await t.close();
    }
  });

  it('behind a trusted proxy the client is the rightmost untrusted entry, not a leftmost value the client prepended', async () => {
    const t = await startTestPlatform({ REGISTER_RATE_LIMIT: '2', TRUST_PROXY: '10.0.0.0/8' });
    try {
      const codes: number[] = [];
      // the proxy (10.0.0.2) appends the real peer 198.51.100.20; the client forged the first entry
      for (let i = 1; i <= 3; i++) codes.push((await registerVia(t, '10.0.0.2', `192.0.2.${i}, 198.51.100.20`)).statusCode);
      expect(codes).toEqual([201, 201, 429]);
      // a different real client behind the same proxy has its own budget
      expect((await registerVia(t, '10.0.0.2', '198.51.100.21')).statusCode).toBe(201);
    } finally {
      await t.close();
    }
  });

  it('a hop count trusts that many proxies from the socket inwards', async () => {
    const t = await startTestPlatform({ REGISTER_RATE_LIMIT: '1', TRUST_PROXY: '2' });
    try {
      // socket = proxy 2, last XFF entry = proxy 1, the one before = the client
      expect((await registerVia(t, '10.0.0.9', 'forged, 198.51.100.30, 10.0.0.1')).statusCode).toBe(201);
      expect((await registerVia(t, '10.0.0.9', 'other-forged, 198.51.100.30, 10.0.0.1')).statusCode).toBe(429);
    } finally {
      await t.close();
    }
  });
});

describe('§4.1 429: without TRUST_PROXY a spoofed X-Forwarded-For does not escape the per-IP limit (docs/configuration.md)', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform({ REGISTER_RATE_LIMIT: '2' });
  });
  afterAll(() => t.close());

  it('every request counts against the socket address whatever X-Forwarded-For says', async () => {
    const codes: number[] = [];
    for (const ip of ['192.0.2.1', '192.0.2.2', '192.0.2.3', '192.0.2.4']) {
      const res = await t.web.inject({
        method: 'POST',
        url: '/api/register',
        payload: { email: freshEmail(), password: 'Tr1cky-horse-battery' },
        headers: { 'x-forwarded-for': ip },
      });
      codes.push(res.statusCode);
    }
    expect(codes).toEqual([201, 201, 429, 429]);
  });

  it('requests rejected by validation (400) do not use up the limit of a fresh platform', async () => {
    const t2 = await startTestPlatform({ REGISTER_RATE_LIMIT: '1' });
    try {
      for (let i = 0; i < 3; i++) {
        expect(
          (
            await t2.web.inject({
              method: 'POST',
              url: '/api/register',
              payload: { email: 'not-an-email', password: 'Tr1cky-horse-battery' },
            })
          ).statusCode,
        ).toBe(400);
      }
      expect(
        (await t2.web.inject({ method: 'POST', url: '/api/register', payload: { email: freshEmail(), password: 'Tr1cky-horse-battery' } }))
          .statusCode,
      ).toBe(201);
    } finally {
      await t2.close();
    }
  });
});
