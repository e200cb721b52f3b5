/**
 * §4.1 sign-in with the identity provider (GET /api/auth/idp and its callback) against a local
 * OpenID Connect provider (test/fakes/oidc-provider.ts) over real sockets: the authorization
 * request (scopes, offline access, prompt, PKCE, state, nonce), the callback sequence (new user,
 * linking an existing user by verified email, §5 automatic linking), every `/login?error=` code,
 * each bad ID token refused, the state cookie binding the flow to one browser, a user whose
 * identity-provider sign-in is disabled (§6), and the refresh token encrypted at rest (§2).
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { decryptSecret } from '../../src/lib/crypto.ts';
import { type FakeOidcFault, type FakeOidcProvider, startFakeOidcProvider } from '../fakes/oidc-provider.ts';
import { sessionCookieFrom, signUp, startTestPlatform, TEST_SECRETS, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const PUBLIC_URL = 'http://app.test';
let t: TestPlatform;
let idp: FakeOidcProvider;
let n = 0;

beforeAll(async () => {
  idp = await startFakeOidcProvider();
  t = await startTestPlatform({
    PUBLIC_URL,
    REGISTER_RATE_LIMIT: '1000',
    IDP_CLIENT_ID: `${idp.clientId},another-audience`,
    IDP_CLIENT_SECRET: idp.clientSecret,
    IDP_ISSUER: idp.issuer,
  });
});
afterAll(async () => {
  await t.close();
  await idp.close();
});
beforeEach(() => {
  n++;
  idp.fault = null;
  idp.authorizeMode = 'consent';
  idp.user = { sub: `idp-sub-${n}`, email: `idp${n}@example.com`, email_verified: true, name: `Idp User ${n}` };
});

const setCookies = (res: { headers: Record<string, unknown> }): string[] =>
  ([] as unknown[]).concat(res.headers['set-cookie'] ?? []).filter((c): c is string => typeof c === 'string');
const stateCookieOf = (res: { headers: Record<string, unknown> }) => {
  const c = setCookies(res).find((x) => x.startsWith('service-oauth-idp='));
  if (!c) throw new Error('no state cookie');
  return c;
};

/** GET /api/auth/idp, then the provider's authorize (which redirects back at once): the callback URL and this browser's cookie. */
async function startFlow() {
  const start = await t.web.inject({ method: 'GET', url: '/api/auth/idp' });
  expect(start.statusCode).toBe(302);
  const setCookie = stateCookieOf(start);
  const atProvider = await fetch(String(start.headers.location), { redirect: 'manual' });
  expect(atProvider.status).toBe(302);
  const back = new URL(atProvider.headers.get('location')!);
  return { start, setCookie, cookie: setCookie.split(';')[0]!, back };
}
const callback = (back: URL | string, cookie?: string) =>
  t.web.inject({
    method: 'GET',
    url: typeof back === 'string' ? back : back.pathname + back.search,
    headers: cookie ? { cookie } : {},
  });
const errorOf = (res: { statusCode: number; headers: Record<string, unknown> }) => {
  expect(res.statusCode).toBe(302);
  const loc = String(res.headers.location);
  expect(loc.startsWith('/login?error=')).toBe(true);
  expect(setCookies(res).some((c) => c.startsWith('service-session='))).toBe(false);
  return new URL(loc, PUBLIC_URL).searchParams.get('error');
};
const usersWithEmail = (email: string) =>
  t.database.db.kysely.selectFrom('users').select(['id', 'email_verified']).where(sql<string>`lower(email)`, '=', email).execute();
const linksOf = (subject: string) =>
  t.database.db.kysely.selectFrom('linked_accounts').selectAll().where('provider', '=', 'idp').where('subject', '=', subject).execute();
const sessionUser = async (token: string) =>
  (await t.web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: `service-session=${token}` } })).json().user;

describe('§4.1 GET /api/auth/idp', () => {
  it('redirects to the discovered authorization endpoint with the §4.1 scopes, offline access, select_account, PKCE S256, state and nonce', async () => {
    const start = await t.web.inject({ method: 'GET', url: '/api/auth/idp' });
    expect(start.statusCode).toBe(302);
    const loc = new URL(String(start.headers.location));
    expect(`${loc.origin}${loc.pathname}`).toBe(`${idp.issuer}/authorize`);
    const q = loc.searchParams;
    expect(q.get('scope')).toBe('openid email profile');
    expect(q.get('access_type')).toBe('offline');
    expect(q.get('prompt')).toBe('select_account');
    expect(q.get('response_type')).toBe('code');
    expect(q.get('client_id')).toBe(idp.clientId); // the first id of the list
    expect(q.get('redirect_uri')).toBe(`${PUBLIC_URL}/api/auth/idp/callback`);
    expect(q.get('code_challenge_method')).toBe('S256');
    expect(q.get('code_challenge')).toMatch(/^[\w-]{43}$/);
    expect(q.get('state')!.length).toBeGreaterThanOrEqual(32);
    expect(q.get('nonce')!.length).toBeGreaterThanOrEqual(32);
    // the state cookie: HttpOnly, Lax, only on the callback path, 10 minutes, and opaque (the state is not readable in it)
    const c = stateCookieOf(start);
    expect(c).toMatch(/HttpOnly/i);
    expect(c).toMatch(/SameSite=Lax/i);
    expect(c).toMatch(/Path=\/api\/auth\/idp\/callback/);
    expect(c).toMatch(/Max-Age=600/);
    expect(c).not.toContain(q.get('state')!);
    expect(c).not.toContain(q.get('nonce')!);
  });

  it('tells the dashboard it is offered (GET /api/features)', async () => {
    const f = (await t.web.inject({ method: 'GET', url: '/api/features' })).json();
    expect(f.idp).toBe(true);
    expect(f.codehost).toBe(false);
  });
});

describe('§4.1 GET /api/auth/idp/callback: the success sequence', () => {
  it('creates a new user, links the account, sets the session cookie, redirects to /dashboard; the refresh token is stored encrypted only', async () => {
    const { back, cookie } = await startFlow();
    const res = await callback(back, cookie);
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBe('/dashboard');
    const user = await sessionUser(sessionCookieFrom(res));
    expect(user).toMatchObject({ email: idp.user.email, name: idp.user.name });
    // the state cookie is spent
    expect(setCookies(res).find((c) => c.startsWith('service-oauth-idp='))).toMatch(/Expires=Thu, 01 Jan 1970/);
    // the token request carried the PKCE verifier and our redirect URI
    const form = idp.tokenRequests.at(-1)!;
    expect(form.get('code_verifier')).toMatch(/^[\w-]{43,128}$/);
    expect(form.get('redirect_uri')).toBe(`${PUBLIC_URL}/api/auth/idp/callback`);

    const links = await linksOf(idp.user.sub);
    expect(links).toHaveLength(1);
    expect(links[0]).toMatchObject({ user_id: user.id, email: idp.user.email });
    const enc = links[0]!.refresh_token_enc!;
    expect(enc).not.toContain(idp.refreshToken);
    expect(decryptSecret(TEST_SECRETS.secretsEncryptionKey, enc)).toBe(idp.refreshToken);
    // nowhere in the row in plain text
    const dump = await sql<{ t: string }>`SELECT row_to_json(l)::text AS t FROM linked_accounts l`.execute(t.database.db.kysely);
    for (const r of dump.rows) expect(r.t).not.toContain(idp.refreshToken);
    expect(await usersWithEmail(idp.user.email!)).toEqual([{ id: user.id, email_verified: true }]);
  });

  it('a second sign-in of the same subject is the same user: no duplicate user or link', async () => {
    const first = await startFlow();
    const a = await sessionUser(sessionCookieFrom(await callback(first.back, first.cookie)));
    const second = await startFlow();
    const b = await sessionUser(sessionCookieFrom(await callback(second.back, second.cookie)));
    expect(b.id).toBe(a.id);
    expect(await linksOf(idp.user.sub)).toHaveLength(1);
    expect(await usersWithEmail(idp.user.email!)).toHaveLength(1);
  });

  it('parallel first sign-ins of one identity make one user and one link (the unique email and link decide the race)', async () => {
    const flows = await Promise.all(Array.from({ length: 6 }, () => startFlow()));
    const answers = await Promise.all(flows.map((f) => callback(f.back, f.cookie)));
    for (const a of answers) expect(a.headers.location).toBe('/dashboard');
    const ids = new Set(await Promise.all(answers.map(async (a) => (await sessionUser(sessionCookieFrom(a))).id)));
    expect(ids.size).toBe(1);
    expect(await usersWithEmail(idp.user.email!)).toHaveLength(1);
    expect(await linksOf(idp.user.sub)).toHaveLength(1);
  });

  it('links an existing password user with that (verified) email: one user, not two; the password set before the proof is cleared', async () => {
    const existing = await signUp(t.web, { email: `Mixed.Case${n}@Example.com`.toLowerCase() });
    idp.user = { sub: `link-${n}`, email: existing.email.toUpperCase(), email_verified: true, name: 'Ignored' };
    const { back, cookie } = await startFlow();
    const res = await callback(back, cookie);
    expect(res.headers.location).toBe('/dashboard');
    const user = await sessionUser(sessionCookieFrom(res));
    expect(user.id).toBe(existing.id);
    expect(await usersWithEmail(existing.email)).toHaveLength(1);
    const listed = await t.web.inject({
      method: 'GET',
      url: '/api/auth/linked-accounts',
      headers: { cookie: `service-session=${sessionCookieFrom(res)}` },
    });
    expect(listed.statusCode).toBe(200);
    expect(listed.json().accounts).toEqual([
      { id: expect.any(String), provider: 'idp', email: existing.email, linkedAt: expect.any(String) },
    ]);
    expect(listed.body).not.toContain('refresh');
    // the provider proved the address: whoever registered it with a password may be a stranger, so
    // their sessions end and their password no longer signs in (test/accounts/preregistration-takeover.test.ts)
    expect(await sessionUser(existing.token)).toBeNull();
    const login = await t.web.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: existing.email, password: existing.password },
    });
    expect(login.statusCode).toBe(401);
  });

  it('reads the email from userinfo when the ID token has none (userinfo tied to the ID token subject)', async () => {
    idp.idTokenWithoutEmail = true;
    try {
      const { back, cookie } = await startFlow();
      const res = await callback(back, cookie);
      expect(res.headers.location).toBe('/dashboard');
      expect((await sessionUser(sessionCookieFrom(res))).email).toBe(idp.user.email);
    } finally {
      idp.idTokenWithoutEmail = false;
    }
  });
});

describe('§4.1 callback errors: /login?error=<code>', () => {
  it('AccessDenied when the user declines at the provider, without any code exchange', async () => {
    idp.authorizeMode = 'denied';
    const before = idp.tokenRequests.length;
    const { back, cookie } = await startFlow();
    expect(errorOf(await callback(back, cookie))).toBe('AccessDenied');
    expect(idp.tokenRequests.length).toBe(before);
  });

  it('IdpAuthFailed for another provider error, with no exchange', async () => {
    const { back, cookie } = await startFlow();
    const before = idp.tokenRequests.length;
    const res = await callback(`/api/auth/idp/callback?error=server_error&state=${back.searchParams.get('state')}`, cookie);
    expect(errorOf(res)).toBe('IdpAuthFailed');
    expect(idp.tokenRequests.length).toBe(before);
  });

  it('IdpAuthFailed without the state cookie (the flow was not started in this browser)', async () => {
    const { back } = await startFlow();
    expect(errorOf(await callback(back))).toBe('IdpAuthFailed');
  });

  it('IdpAuthFailed when state does not match the cookie: a callback URL from another browser is refused', async () => {
    const mine = await startFlow();
    const theirs = await startFlow();
    const before = idp.tokenRequests.length;
    expect(errorOf(await callback(theirs.back, mine.cookie))).toBe('IdpAuthFailed');
    const tampered = new URL(mine.back);
    tampered.searchParams.set('state', 'x'.repeat(43));
    expect(errorOf(await callback(tampered, mine.cookie))).toBe('IdpAuthFailed');
    expect(idp.tokenRequests.length).toBe(before);
  });

  it('IdpAuthFailed for a forged or altered state cookie, and for a callback without a code', async () => {
    const { back, cookie } = await startFlow();
    const forged = `${cookie.slice(0, -4)}AAAA`;
    expect(errorOf(await callback(back, forged))).toBe('IdpAuthFailed');
    const noCode = new URL(back);
    noCode.searchParams.delete('code');
    expect(errorOf(await callback(noCode, cookie))).toBe('IdpAuthFailed');
  });

  it('IdpTokenFailed when the provider refuses the code', async () => {
    idp.fault = 'token-error';
    const { back, cookie } = await startFlow();
    expect(errorOf(await callback(back, cookie))).toBe('IdpTokenFailed');
  });

  const badTokens: FakeOidcFault[] = [
    'wrong-issuer',
    'wrong-audience',
    'expired',
    'wrong-nonce',
    'unknown-kid',
    'alg-none',
    'bad-signature',
  ];
  for (const fault of badTokens) {
    it(`IdpTokenFailed for an ID token with ${fault}: no user, no link, no session`, async () => {
      idp.fault = fault;
      const { back, cookie } = await startFlow();
      expect(errorOf(await callback(back, cookie))).toBe('IdpTokenFailed');
      expect(await usersWithEmail(idp.user.email!)).toHaveLength(0);
      expect(await linksOf(idp.user.sub)).toHaveLength(0);
    });
  }

  it('IdpNoEmail when the provider has not verified the email (never linked by an unverified address)', async () => {
    const victim = await signUp(t.web);
    idp.user = { sub: `unverified-${n}`, email: victim.email, email_verified: false };
    const { back, cookie } = await startFlow();
    expect(errorOf(await callback(back, cookie))).toBe('IdpNoEmail');
    expect(await linksOf(idp.user.sub)).toHaveLength(0);
  });

  it('IdpNoEmail when the provider shares no email at all', async () => {
    idp.user = { sub: `noemail-${n}` };
    const { back, cookie } = await startFlow();
    expect(errorOf(await callback(back, cookie))).toBe('IdpNoEmail');
  });

  it('AccessDenied for a user whose identity-provider sign-in is disabled (§6), linked or matched by email; no session', async () => {
    const { back, cookie } = await startFlow();
    const user = await sessionUser(sessionCookieFrom(await callback(back, cookie)));
    await t.database.db.kysely.updateTable('users').set({ idp_signin_disabled_at: new Date() }).where('id', '=', user.id).execute();
    const again = await startFlow();
    expect(errorOf(await callback(again.back, again.cookie))).toBe('AccessDenied');
    // matched by email under a new subject: refused too, and not linked
    idp.user = { ...idp.user, sub: `${idp.user.sub}-other` };
    const third = await startFlow();
    expect(errorOf(await callback(third.back, third.cookie))).toBe('AccessDenied');
    expect(await linksOf(idp.user.sub)).toHaveLength(0);
    // re-enabled: signs in again
    await t.database.db.kysely.updateTable('users').set({ idp_signin_disabled_at: null }).where('id', '=', user.id).execute();
    const fourth = await startFlow();
    expect((await callback(fourth.back, fourth.cookie)).headers.location).toBe('/dashboard');
  });

  it('IdpNotConfigured without a client id or secret, for the start and the callback', async () => {
    await withTestPlatform({ PUBLIC_URL }, async (other) => {
      const start = await other.web.inject({ method: 'GET', url: '/api/auth/idp' });
      expect(start.statusCode).toBe(302);
      expect(start.headers.location).toBe('/login?error=IdpNotConfigured');
      const cb = await other.web.inject({ method: 'GET', url: '/api/auth/idp/callback?code=x&state=y' });
      expect(cb.headers.location).toBe('/login?error=IdpNotConfigured');
      expect((await other.web.inject({ method: 'GET', url: '/api/features' })).json().idp).toBe(false);
    });
  });

  it('IdpAuthError when the provider cannot be reached (discovery fails)', async () => {
    await withTestPlatform({ PUBLIC_URL, IDP_CLIENT_ID: 'c', IDP_CLIENT_SECRET: 's', IDP_ISSUER: 'http://127.0.0.1:9' }, async (other) => {
      const start = await other.web.inject({ method: 'GET', url: '/api/auth/idp' });
      expect(start.headers.location).toBe('/login?error=IdpAuthError');
    });
  });
});

describe('GET /api/auth/linked-accounts', () => {
  it('401 without a session; a user sees only their own links', async () => {
    expect((await t.web.inject({ method: 'GET', url: '/api/auth/linked-accounts' })).statusCode).toBe(401);
    const stranger = await signUp(t.web);
    const res = await t.web.inject({ method: 'GET', url: '/api/auth/linked-accounts', headers: { cookie: stranger.cookie } });
    expect(res.json()).toEqual({ accounts: [] });
  });
});
