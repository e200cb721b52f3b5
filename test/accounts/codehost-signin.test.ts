/**
 * §4.1 sign-in with the code host (GET /api/auth/codehost and its callback) against a local
 * GitHub-style OAuth app server (test/fakes/codehost.ts) over real sockets: the authorize
 * redirect with `state`, the token request (JSON), `/user` and `/user/emails` (the primary
 * verified email), a new user, linking an existing user by email (§5), the same `/login?error=`
 * vocabulary as the identity provider, and the state cookie binding the flow to one browser.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type FakeCodehost, startFakeCodehost } from '../fakes/codehost.ts';
import { sessionCookieFrom, signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const PUBLIC_URL = 'http://app.test';
let t: TestPlatform;
let host: FakeCodehost;
let n = 0;

beforeAll(async () => {
  host = await startFakeCodehost();
  t = await startTestPlatform({
    PUBLIC_URL,
    REGISTER_RATE_LIMIT: '1000',
    CODEHOST_CLIENT_ID: host.clientId,
    CODEHOST_CLIENT_SECRET: host.clientSecret,
    CODEHOST_URL: host.url,
    CODEHOST_API_URL: host.apiUrl,
  });
});
afterAll(async () => {
  await t.close();
  await host.close();
});
beforeEach(() => {
  n++;
  host.authorizeMode = 'consent';
  host.refuseCodes = false;
  host.apiDown = false;
  host.user = {
    id: 1000 + n,
    login: `octo${n}`,
    name: `Octo ${n}`,
    emails: [
      { email: `old${n}@example.com`, primary: false, verified: true },
      { email: `octo${n}@example.com`, primary: true, verified: true },
    ],
  };
});

const setCookies = (res: { headers: Record<string, unknown> }): string[] =>
  ([] as unknown[]).concat(res.headers['set-cookie'] ?? []).filter((c): c is string => typeof c === 'string');

async function startFlow() {
  const start = await t.web.inject({ method: 'GET', url: '/api/auth/codehost' });
  expect(start.statusCode).toBe(302);
  const setCookie = setCookies(start).find((c) => c.startsWith('service-oauth-codehost='));
  if (!setCookie) throw new Error('no state cookie');
  const atHost = await fetch(String(start.headers.location), { redirect: 'manual' });
  const back = new URL(atHost.headers.get('location')!);
  return { start, setCookie, cookie: setCookie.split(';')[0]!, back };
}
const callback = (back: URL | string, cookie?: string) =>
  t.web.inject({ method: 'GET', url: typeof back === 'string' ? back : back.pathname + back.search, headers: cookie ? { cookie } : {} });
const errorOf = (res: { statusCode: number; headers: Record<string, unknown> }) => {
  expect(res.statusCode).toBe(302);
  expect(setCookies(res).some((c) => c.startsWith('service-session='))).toBe(false);
  return new URL(String(res.headers.location), PUBLIC_URL).searchParams.get('error');
};
const sessionUser = async (token: string) =>
  (await t.web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: `service-session=${token}` } })).json().user;
const links = (subject: string) =>
  t.database.db.kysely
    .selectFrom('linked_accounts')
    .selectAll()
    .where('provider', '=', 'codehost')
    .where('subject', '=', subject)
    .execute();

describe('§4.1 GET /api/auth/codehost', () => {
  it('redirects to {CODEHOST_URL}/login/oauth/authorize with client id, redirect URI, scopes and state in an HttpOnly cookie', async () => {
    const { start, setCookie } = await startFlow();
    const loc = new URL(String(start.headers.location));
    expect(`${loc.origin}${loc.pathname}`).toBe(`${host.url}/login/oauth/authorize`);
    expect(loc.searchParams.get('client_id')).toBe(host.clientId);
    expect(loc.searchParams.get('redirect_uri')).toBe(`${PUBLIC_URL}/api/auth/codehost/callback`);
    expect(loc.searchParams.get('scope')).toBe('read:user user:email');
    expect(loc.searchParams.get('state')!.length).toBeGreaterThanOrEqual(32);
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/Path=\/api\/auth\/codehost\/callback/);
    expect(setCookie).not.toContain(loc.searchParams.get('state')!);
    expect((await t.web.inject({ method: 'GET', url: '/api/features' })).json()).toMatchObject({ codehost: true, idp: false });
  });
});

describe('§4.1 GET /api/auth/codehost/callback', () => {
  it('new user from the primary verified email; the token request asks for JSON; linked; session; /dashboard', async () => {
    const { back, cookie } = await startFlow();
    const res = await callback(back, cookie);
    expect(res.headers.location).toBe('/dashboard');
    const user = await sessionUser(sessionCookieFrom(res));
    expect(user).toMatchObject({ email: `octo${n}@example.com`, name: `Octo ${n}` });
    const tokenReq = host.tokenRequests.at(-1)!;
    expect(tokenReq.accept).toBe('application/json');
    expect(tokenReq.form.get('client_secret')).toBe(host.clientSecret);
    expect(tokenReq.form.get('redirect_uri')).toBe(`${PUBLIC_URL}/api/auth/codehost/callback`);
    expect(await links(String(host.user.id))).toEqual([expect.objectContaining({ user_id: user.id, email: `octo${n}@example.com` })]);
    // again: the same user
    const again = await startFlow();
    expect((await sessionUser(sessionCookieFrom(await callback(again.back, again.cookie)))).id).toBe(user.id);
    expect(await links(String(host.user.id))).toHaveLength(1);
  });

  it('links an existing password user with that email: one user', async () => {
    const existing = await signUp(t.web);
    host.user.emails = [{ email: existing.email, primary: true, verified: true }];
    const { back, cookie } = await startFlow();
    const res = await callback(back, cookie);
    expect((await sessionUser(sessionCookieFrom(res))).id).toBe(existing.id);
    const count = await t.database.db.kysely
      .selectFrom('users')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where(sql<string>`lower(email)`, '=', existing.email)
      .executeTakeFirstOrThrow();
    expect(Number(count.n)).toBe(1);
  });

  it('IdpNoEmail when the primary email is not verified (a verified secondary one is not taken)', async () => {
    host.user.emails = [
      { email: `p${n}@example.com`, primary: true, verified: false },
      { email: `s${n}@example.com`, primary: false, verified: true },
    ];
    const { back, cookie } = await startFlow();
    expect(errorOf(await callback(back, cookie))).toBe('IdpNoEmail');
    expect(await links(String(host.user.id))).toHaveLength(0);
  });

  it('AccessDenied when the user declines; IdpAuthFailed for another error; neither exchanges', async () => {
    host.authorizeMode = 'denied';
    const before = host.tokenRequests.length;
    const { back, cookie } = await startFlow();
    expect(errorOf(await callback(back, cookie))).toBe('AccessDenied');
    const other = await startFlow();
    expect(errorOf(await callback(`/api/auth/codehost/callback?error=application_suspended&state=x`, other.cookie))).toBe('IdpAuthFailed');
    expect(host.tokenRequests.length).toBe(before);
  });

  it('IdpAuthFailed without the cookie, with another browser’s state, or with the identity provider’s cookie name', async () => {
    const mine = await startFlow();
    const theirs = await startFlow();
    const before = host.tokenRequests.length;
    expect(errorOf(await callback(mine.back))).toBe('IdpAuthFailed');
    expect(errorOf(await callback(theirs.back, mine.cookie))).toBe('IdpAuthFailed');
    expect(errorOf(await callback(mine.back, mine.cookie.replace('service-oauth-codehost', 'service-oauth-idp')))).toBe('IdpAuthFailed');
    expect(host.tokenRequests.length).toBe(before);
  });

  it('IdpTokenFailed when the code is refused (200 {error}); IdpAuthError when the API is down', async () => {
    host.refuseCodes = true;
    const a = await startFlow();
    expect(errorOf(await callback(a.back, a.cookie))).toBe('IdpTokenFailed');
    host.refuseCodes = false;
    host.apiDown = true;
    const b = await startFlow();
    expect(errorOf(await callback(b.back, b.cookie))).toBe('IdpAuthError');
  });

  it('the identity provider being disabled for a user does not refuse the code host', async () => {
    const { back, cookie } = await startFlow();
    const user = await sessionUser(sessionCookieFrom(await callback(back, cookie)));
    await t.database.db.kysely.updateTable('users').set({ idp_signin_disabled_at: new Date() }).where('id', '=', user.id).execute();
    const again = await startFlow();
    expect((await callback(again.back, again.cookie)).headers.location).toBe('/dashboard');
  });

  it('IdpNotConfigured without client id and secret', async () => {
    await withTestPlatform({ PUBLIC_URL }, async (other) => {
      expect((await other.web.inject({ method: 'GET', url: '/api/auth/codehost' })).headers.location).toBe('/login?error=IdpNotConfigured');
      expect((await other.web.inject({ method: 'GET', url: '/api/auth/codehost/callback?code=a&state=b' })).headers.location).toBe(
        '/login?error=IdpNotConfigured',
      );
    });
  });
});
