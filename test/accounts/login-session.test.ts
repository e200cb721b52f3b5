/**
 * §4.1 POST /api/auth/login, GET /api/auth/session, POST /api/auth/signout, GET|POST
 * /api/auth/nonce; §2 Session ("Deleted on sign-out"); §5 session cookie attributes; §8 cookie
 * lifetime 30 days.
 */
import { hash as argonHash } from '@node-rs/argon2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/config/limits.ts';
import { sha256 } from '../../src/lib/crypto.ts';
import { sessionCookieFrom, signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const THIRTY_DAYS_S = 30 * 24 * 60 * 60;
let t: TestPlatform;
let n = 0;
const freshEmail = () => `login${Date.now().toString(36)}${n++}@example.com`;
const login = (payload: object, app = t.web) => app.inject({ method: 'POST', url: '/api/auth/login', payload });
const session = (cookie?: string, app = t.web) =>
  app.inject({ method: 'GET', url: '/api/auth/session', headers: cookie ? { cookie } : {} });
const setCookies = (res: { headers: Record<string, unknown> }): string[] =>
  ([] as unknown[]).concat(res.headers['set-cookie'] ?? []).filter((c): c is string => typeof c === 'string');
const sessionSetCookie = (res: { headers: Record<string, unknown> }) => {
  const c = setCookies(res).find((x) => x.startsWith('service-session='));
  if (!c) throw new Error('no service-session Set-Cookie');
  return c;
};
const attrs = (setCookie: string) =>
  setCookie
    .split(';')
    .slice(1)
    .map((a) => a.trim())
    .reduce<Record<string, string | true>>((acc, a) => {
      const [k, ...v] = a.split('=');
      acc[k!.toLowerCase()] = v.length ? v.join('=') : true;
      return acc;
    }, {});

beforeAll(async () => {
  t = await startTestPlatform({ REGISTER_RATE_LIMIT: '1000', ADMIN_EMAILS: 'Boss@Example.com, other-admin@example.com' });
});
afterAll(() => t.close());

describe('§4.1 POST /api/auth/login', () => {
  it('200 {ok:true, user:{id,name}} and a session cookie with HttpOnly, SameSite=Lax, Path=/, 30 days (§5, §8); no Secure on http', async () => {
    const email = freshEmail();
    const reg = await t.web.inject({
      method: 'POST',
      url: '/api/register',
      payload: { email, password: 'Tr1cky-horse-battery', name: 'Grace' },
    });
    const res = await login({ email, password: 'Tr1cky-horse-battery' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true, user: { id: reg.json().id, name: 'Grace' } });

    const c = sessionSetCookie(res);
    const token = /^service-session=([^;]+)/.exec(c)![1]!;
    expect(token.length).toBeGreaterThanOrEqual(32);
    const a = attrs(c);
    expect(a.httponly).toBe(true);
    expect(String(a.samesite).toLowerCase()).toBe('lax');
    expect(a.path).toBe('/');
    expect(Number(a['max-age'])).toBe(THIRTY_DAYS_S);
    expect(LIMITS.sessionTtlMs).toBe(THIRTY_DAYS_S * 1000);
    const expires = Date.parse(String(a.expires));
    expect(Math.abs(expires - (Date.now() + THIRTY_DAYS_S * 1000))).toBeLessThan(60_000);
    // PUBLIC_URL defaults to http://localhost:3000: no Secure attribute
    expect(a.secure).toBeUndefined();

    // only the token's hash is stored (§2 Session is a database record bound to the cookie)
    const rows = await t.database.db.kysely
      .selectFrom('sessions')
      .select(['token_hash', 'expires_at'])
      .where('user_id', '=', reg.json().id)
      .execute();
    expect(rows).toHaveLength(1);
    expect(Buffer.compare(rows[0]!.token_hash, sha256(token))).toBe(0);
    expect(rows[0]!.token_hash.toString('utf8')).not.toContain(token);
  });

  it('each login creates a new random token', async () => {
    const u = await signUp(t.web, { email: freshEmail() });
    const a = sessionSetCookie(await login({ email: u.email, password: u.password }));
    const b = sessionSetCookie(await login({ email: u.email, password: u.password }));
    expect(a.split(';')[0]).not.toBe(b.split(';')[0]);
  });

  it('the cookie gets Secure when PUBLIC_URL is https (§5 / docs/configuration.md)', async () => {
    await withTestPlatform({ PUBLIC_URL: 'https://platform.example.com' }, async (t2) => {
      const u = await signUp(t2.web, { email: freshEmail() });
      const res = await login({ email: u.email, password: u.password }, t2.web);
      expect(res.statusCode).toBe(200);
      const a = attrs(sessionSetCookie(res));
      expect(a.secure).toBe(true);
      expect(a.httponly).toBe(true);
      expect(String(a.samesite).toLowerCase()).toBe('lax');
    });
  });

  it('email is case-insensitive on sign-in (§2 User)', async () => {
    const u = await signUp(t.web, { email: freshEmail() });
    const res = await login({ email: `  ${u.email.toUpperCase()} `, password: u.password });
    expect(res.statusCode).toBe(200);
    expect(res.json().user.id).toBe(u.id);
  });

  it.each([
    ['missing email', { password: 'Tr1cky-horse-battery' }],
    ['missing password', { email: 'someone@example.com' }],
    ['empty email', { email: '', password: 'Tr1cky-horse-battery' }],
    ['empty password', { email: 'someone@example.com', password: '' }],
    ['empty object', {}],
  ])('%s → 400 with a JSON error', async (_l, payload) => {
    const res = await login(payload);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: expect.any(String) });
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('wrong password → 401 Invalid credentials, no cookie', async () => {
    const u = await signUp(t.web, { email: freshEmail() });
    const res = await login({ email: u.email, password: 'wrong-password' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Invalid credentials' });
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('unknown email → 401 with the same body as a wrong password (no user enumeration)', async () => {
    const res = await login({ email: 'nobody-here@example.com', password: 'Tr1cky-horse-battery' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Invalid credentials' });
  });

  it('a wallet user (no password) cannot sign in with a password → 401', async () => {
    const email = `0x${'ab'.repeat(20)}@wallet.local`;
    await t.database.db.kysely
      .insertInto('users')
      .values({ email, name: 'Wallet', password_hash: null, referral_code: 'WALLETNOPW' })
      .execute();
    const res = await login({ email, password: 'Tr1cky-horse-battery' });
    expect(res.statusCode).toBe(401);
  });
});

describe('§4.1 GET /api/auth/session (always 200)', () => {
  it('with a valid cookie → {user:{id,name,email,isAdmin:false}}', async () => {
    const u = await signUp(t.web, { email: freshEmail(), name: 'Linus' });
    const res = await session(u.cookie);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ user: { id: u.id, name: 'Linus', email: u.email, isAdmin: false } });
  });

  it('without a cookie → 200 {user:null}', async () => {
    const res = await session();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ user: null });
  });

  it.each([
    ['garbage', 'service-session=garbage'],
    ['empty', 'service-session='],
    ['very long', `service-session=${'A'.repeat(5000)}`],
    ['malformed cookie header', 'service-session'],
    ['another cookie only', 'other=1'],
  ])('with a %s cookie → 200 {user:null}', async (_l, cookie) => {
    const res = await session(cookie);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ user: null });
  });

  it('an expired session → {user:null}', async () => {
    const u = await signUp(t.web, { email: freshEmail() });
    await t.database.db.kysely
      .updateTable('sessions')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('user_id', '=', u.id)
      .execute();
    expect((await session(u.cookie)).json()).toEqual({ user: null });
  });

  it('isAdmin is true for a verified email in ADMIN_EMAILS, compared case-insensitively (§2, §5); registering the address proves nothing', async () => {
    // ADMIN_EMAILS has "Boss@Example.com"; the user registers as BOSS@example.COM
    const u = await signUp(t.web, { email: 'BOSS@example.COM' });
    expect((await session(u.cookie)).json().user).toMatchObject({ id: u.id, email: 'boss@example.com', isAdmin: false });
    // an identity provider vouching for the address is what makes the match count, but not for a
    // password set before that proof (it may be a stranger's: test/accounts/preregistration-takeover.test.ts)
    await t.database.db.kysely.updateTable('users').set({ email_verified: true }).where('id', '=', u.id).execute();
    const other = await signUp(t.web, { email: 'Other-Admin@example.com' });
    expect((await session(other.cookie)).json().user.isAdmin).toBe(false);
    const signIn = async (password: string) => {
      const res = await t.web.inject({ method: 'POST', url: '/api/auth/login', payload: { email: 'boss@example.com', password } });
      return (await session(`service-session=${sessionCookieFrom(res)}`)).json().user;
    };
    expect(await signIn('correct horse battery')).toMatchObject({ id: u.id, isAdmin: false });
    // a password set after the proof (as a reset by the verified owner sets it)
    const passwordHash = await argonHash('a password set after the proof', { algorithm: 2 });
    await t.database.db.kysely.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', u.id).execute();
    expect(await signIn('a password set after the proof')).toMatchObject({ id: u.id, isAdmin: true });
  });

  it('with ADMIN_EMAILS_REQUIRE_VERIFIED=false an ADMIN_EMAILS match is enough (closed test deployments)', async () => {
    await withTestPlatform({ ADMIN_EMAILS: 'tester@example.com', ADMIN_EMAILS_REQUIRE_VERIFIED: 'false' }, async (open) => {
      const u = await signUp(open.web, { email: 'Tester@example.com' });
      const res = await open.web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: u.cookie } });
      expect(res.json().user.isAdmin).toBe(true);
    });
  });
});

describe('§4.1 POST /api/auth/signout', () => {
  it('{ok:true}, clears the cookie, deletes the session row, and the old cookie no longer works (§2 Session)', async () => {
    const u = await signUp(t.web, { email: freshEmail() });
    expect((await session(u.cookie)).json().user?.id).toBe(u.id);
    const before = await t.database.db.kysely.selectFrom('sessions').select('id').where('token_hash', '=', sha256(u.token)).execute();
    expect(before).toHaveLength(1);

    const res = await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true });
    const cleared = sessionSetCookie(res);
    expect(cleared).toMatch(/^service-session=;/);
    const a = attrs(cleared);
    expect(a.path).toBe('/');
    expect(Number(a['max-age'] ?? 0) <= 0 || Date.parse(String(a.expires)) <= Date.now()).toBe(true);

    const after = await t.database.db.kysely.selectFrom('sessions').select('id').where('token_hash', '=', sha256(u.token)).execute();
    expect(after).toHaveLength(0);
    expect((await session(u.cookie)).json()).toEqual({ user: null });
    const me = await t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie: u.cookie } });
    expect(me.statusCode).toBe(401);
  });

  it('signing out one session leaves the user’s other sessions alive', async () => {
    const u = await signUp(t.web, { email: freshEmail() });
    const second = sessionSetCookie(await login({ email: u.email, password: u.password })).split(';')[0]!;
    await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie } });
    expect((await session(second)).json().user?.id).toBe(u.id);
  });

  it.each([
    ['no cookie', {}],
    ['a garbage cookie', { cookie: 'service-session=garbage' }],
  ])('with %s → still 200 {ok:true} (always 200)', async (_l, headers) => {
    const res = await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true });
  });
});

describe('§4.1 GET|POST /api/auth/nonce', () => {
  it('GET and POST both return {nonce} with a random string, different on every call', async () => {
    const seen = new Set<string>();
    for (const method of ['GET', 'POST', 'GET', 'POST'] as const) {
      const res = await t.web.inject({ method, url: '/api/auth/nonce' });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(Object.keys(body)).toEqual(['nonce']);
      expect(body.nonce).toMatch(/^[A-Za-z0-9]{8,}$/); // EIP-4361: alphanumeric, at least 8
      seen.add(body.nonce);
    }
    expect(seen.size).toBe(4);
  });
});

describe('nonce flood (docs/security.md): issuing stores nothing, is limited per IP, and spent nonces are purged', () => {
  const countNonces = async (p: TestPlatform) =>
    Number(
      (
        await p.database.db.kysely
          .selectFrom('siwe_nonces')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('hundreds of nonce requests write no row', async () => {
    await withTestPlatform({ NONCE_RATE_LIMIT: '100000' }, async (p) => {
      const before = await countNonces(p);
      await Promise.all(Array.from({ length: 300 }, (_, i) => p.web.inject({ method: i % 2 ? 'GET' : 'POST', url: '/api/auth/nonce' })));
      expect(await countNonces(p)).toBe(before);
    });
  });

  it('beyond NONCE_RATE_LIMIT per IP per minute → 429 with Retry-After; another IP is unaffected', async () => {
    await withTestPlatform({ NONCE_RATE_LIMIT: '3' }, async (p) => {
      const get = (ip: string) => p.web.inject({ method: 'GET', url: '/api/auth/nonce', remoteAddress: ip });
      for (let i = 0; i < 3; i++) expect((await get('192.0.2.70')).statusCode).toBe(200);
      const over = await get('192.0.2.70');
      expect(over.statusCode).toBe(429);
      expect(over.json()).toMatchObject({ error: 'Too many requests' });
      expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
      expect((await get('192.0.2.71')).statusCode).toBe(200);
    });
  });

  it('the purge job deletes spent nonces past their expiry and keeps live ones', async () => {
    await withTestPlatform({}, async (p) => {
      const db = p.database.db.kysely;
      await db
        .insertInto('siwe_nonces')
        .values([
          { nonce: 'spent-expired', expires_at: new Date(Date.now() - 1000) },
          { nonce: 'spent-live', expires_at: new Date(Date.now() + 60_000) },
        ])
        .execute();
      expect(await p.platform.services.accounts.purgeExpiredNonces()).toBe(1);
      expect((await db.selectFrom('siwe_nonces').select('nonce').execute()).map((r) => r.nonce)).toEqual(['spent-live']);
    });
  });
});

describe('expired sessions are purged (a job of the web app)', () => {
  it('deletes sessions past their expiry and keeps live ones, which still authenticate', async () => {
    const live = await signUp(t.web, { email: freshEmail() });
    const stale = await signUp(t.web, { email: freshEmail() });
    const db = t.database.db.kysely;
    await db
      .updateTable('sessions')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('user_id', '=', stale.id)
      .execute();
    expect(await t.platform.services.accounts.purgeExpiredSessions()).toBeGreaterThanOrEqual(1);
    expect(await db.selectFrom('sessions').select('id').where('user_id', '=', stale.id).execute()).toEqual([]);
    expect((await session(live.cookie)).json().user?.id).toBe(live.id);
  });
});

describe('§4.1 nonces are unpredictable ("random string"; §5 SIWE nonce)', () => {
  it('consecutive nonces share no long substring (viem generateSiweNonce returns shifted windows of one buffer)', async () => {
    const nonces: string[] = [];
    for (let i = 0; i < 20; i++) nonces.push((await t.web.inject({ method: 'GET', url: '/api/auth/nonce' })).json().nonce);
    for (let i = 0; i < nonces.length; i++) {
      const a = nonces[i]!;
      expect(a.length).toBeGreaterThanOrEqual(16);
      for (let j = 0; j < nonces.length; j++) {
        if (i === j) continue;
        // any 12-character window of one nonce appearing in another means they are related
        for (let k = 0; k + 12 <= a.length; k += 4) expect(nonces[j]!.includes(a.slice(k, k + 12))).toBe(false);
      }
    }
  });
});

describe('§4.1 current user and profile (paths not shown: GET|POST|PATCH /api/user)', () => {
  it('GET /api/user without a session → 401', async () => {
    const res = await t.web.inject({ method: 'GET', url: '/api/user' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });

  it('POST and PATCH update the name; the session shows it', async () => {
    const u = await signUp(t.web, { email: freshEmail() });
    for (const [method, name] of [
      ['POST', 'New Name'],
      ['PATCH', 'Newer Name'],
    ] as const) {
      const res = await t.web.inject({ method, url: '/api/user', headers: { cookie: u.cookie }, payload: { name: `  ${name}  ` } });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ id: u.id, name });
      expect((await session(u.cookie)).json().user.name).toBe(name);
    }
  });

  it('an empty name → 400; no session → 401', async () => {
    const u = await signUp(t.web, { email: freshEmail() });
    expect(
      (await t.web.inject({ method: 'PATCH', url: '/api/user', headers: { cookie: u.cookie }, payload: { name: '   ' } })).statusCode,
    ).toBe(400);
    expect((await t.web.inject({ method: 'PATCH', url: '/api/user', payload: { name: 'x' } })).statusCode).toBe(401);
  });

  it('GET /api/user for a session whose user was deleted → 401 or 404, never 500', async () => {
    const u = await signUp(t.web, { email: freshEmail() });
    await t.database.db.kysely.deleteFrom('users').where('id', '=', u.id).execute();
    const res = await t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie: u.cookie } });
    expect([401, 404]).toContain(res.statusCode);
  });
});
