/**
 * Cross-site request refusal (docs/security.md "Cross-site requests"): state-changing requests
 * that carry the session cookie, and sign-ins, must come from PUBLIC_URL's origin. Browsers send
 * `Origin` or `Sec-Fetch-Site`; requests with neither (curl, SDKs) are not browsers and pass.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform({
    PUBLIC_URL: 'https://app.example.com',
    AGENTS_DOMAIN: 'agents.example.com',
    REGISTER_RATE_LIMIT: '1000',
    CSRF_ALLOWED_ORIGINS: 'http://localhost:5173',
  });
});
afterAll(() => t?.close());

const FOREIGN: Record<string, Record<string, string>> = {
  'a foreign Origin': { origin: 'https://evil.example.net' },
  'an agent subdomain Origin (same site, other origin)': { origin: 'https://a1b2c3.agents.example.com' },
  'a sibling origin with another scheme': { origin: 'http://app.example.com' },
  'Origin null': { origin: 'null' },
  'Sec-Fetch-Site cross-site': { 'sec-fetch-site': 'cross-site' },
  'Sec-Fetch-Site same-site (agent subdomain)': { 'sec-fetch-site': 'same-site' },
};

describe('state-changing cookie requests from another origin → 403, and nothing changes', () => {
  it.each(Object.entries(FOREIGN))('%s: sign-out keeps the session, rename and workflow create change nothing', async (_name, headers) => {
    const u = await signUp(t.web);
    const out = await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie, ...headers } });
    expect(out.statusCode).toBe(403);
    expect(out.json()).toEqual({ error: 'Cross-site request refused' });
    const still = await t.web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: u.cookie } });
    expect(still.json().user?.id).toBe(u.id);

    const profile = await t.web.inject({
      method: 'PATCH',
      url: '/api/user',
      headers: { cookie: u.cookie, ...headers },
      payload: { name: 'Pwned' },
    });
    expect(profile.statusCode).toBe(403);
    const wf = await t.web.inject({
      method: 'POST',
      url: '/api/workflows',
      headers: { cookie: u.cookie, ...headers },
      payload: { name: 'x' },
    });
    expect(wf.statusCode).toBe(403);
    const me = await t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie: u.cookie } });
    expect(me.json().name).not.toBe('Pwned');
    const list = await t.web.inject({ method: 'GET', url: '/api/workflows', headers: { cookie: u.cookie } });
    expect(list.json().workflows ?? list.json()).toHaveLength(0);
  });

  it.each(Object.entries(FOREIGN))('%s: a forged sign-in (login CSRF) → 403, no cookie', async (_name, headers) => {
    const u = await signUp(t.web);
    const res = await t.web.inject({ method: 'POST', url: '/api/auth/login', headers, payload: { email: u.email, password: u.password } });
    expect(res.statusCode).toBe(403);
    expect(res.headers['set-cookie']).toBeUndefined();
  });
});

describe('our own origin, a configured extra origin, and non-browser clients pass', () => {
  const cases: Record<string, Record<string, string>> = {
    'PUBLIC_URL origin': { origin: 'https://app.example.com' },
    'CSRF_ALLOWED_ORIGINS entry': { origin: 'http://localhost:5173' },
    'Sec-Fetch-Site same-origin': { 'sec-fetch-site': 'same-origin' },
    'Sec-Fetch-Site none (typed by the user)': { 'sec-fetch-site': 'none' },
    'neither header (curl, SDK)': {},
  };
  it.each(Object.entries(cases))('%s', async (_name, headers) => {
    const u = await signUp(t.web);
    const login = await t.web.inject({
      method: 'POST',
      url: '/api/auth/login',
      headers,
      payload: { email: u.email, password: u.password },
    });
    expect(login.statusCode).toBe(200);
    const profile = await t.web.inject({
      method: 'PATCH',
      url: '/api/user',
      headers: { cookie: u.cookie, ...headers },
      payload: { name: 'Renamed' },
    });
    expect(profile.statusCode).toBe(200);
    const out = await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie, ...headers } });
    expect(out.statusCode).toBe(200);
  });

  it('reads (GET) with a foreign Origin are not refused; cookie-less public POSTs (webhooks) are not either', async () => {
    const u = await signUp(t.web);
    const res = await t.web.inject({
      method: 'GET',
      url: '/api/auth/session',
      headers: { cookie: u.cookie, origin: 'https://evil.example.net' },
    });
    expect(res.statusCode).toBe(200);
    const nonce = await t.web.inject({ method: 'POST', url: '/api/auth/nonce', headers: { origin: 'https://evil.example.net' } });
    expect(nonce.statusCode).toBe(200);
  });
});

describe('loopback aliases of a loopback PUBLIC_URL (the default http://localhost:3000)', () => {
  it('http://127.0.0.1:3000 and http://[::1]:3000 are our own origin; other ports and schemes are not', async () => {
    const { ownOrigins, createOriginCheck } = await import('../../src/http/shared/origin-check.ts');
    expect(ownOrigins('http://localhost:3000')).toEqual([
      'http://localhost:3000',
      'http://localhost:3000',
      'http://127.0.0.1:3000',
      'http://[::1]:3000',
    ]);
    expect(ownOrigins('https://app.example.com')).toEqual(['https://app.example.com']);
    const { check } = createOriginCheck({ publicUrl: 'http://localhost:3000', sessionCookie: 'service-session' });
    const req = (origin: string) => ({ method: 'POST', url: '/api/auth/login', headers: { origin } }) as never;
    expect(() => check(req('http://127.0.0.1:3000'))).not.toThrow();
    expect(() => check(req('http://[::1]:3000'))).not.toThrow();
    expect(() => check(req('http://127.0.0.1:3001'))).toThrow('Cross-site request refused');
    expect(() => check(req('https://127.0.0.1:3000'))).toThrow('Cross-site request refused');
    expect(() => check(req('http://evil.localhost:3000'))).toThrow('Cross-site request refused');
  });
});
