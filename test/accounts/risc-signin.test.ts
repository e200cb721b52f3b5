/**
 * Security events end to end with identity-provider sign-in (§4.1, §6): one local OpenID provider
 * (test/fakes/oidc-provider.ts) signs the user in and, with the same key and JWKS, sends the
 * security events. A user signed in with the provider, then named by `sub` in an account-disabled
 * event with reason hijacking, loses the session at once and is refused at the next sign-in
 * (AccessDenied) until an account-enabled event; tokens-revoked drops the refresh token the sign-in
 * stored.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type FakeOidcProvider, startFakeOidcProvider } from '../fakes/oidc-provider.ts';
import { EVENT } from '../fakes/risc-issuer.ts';
import { sessionCookieFrom, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const PUBLIC_URL = 'http://app.test';
let t: TestPlatform;
let idp: FakeOidcProvider;

beforeAll(async () => {
  idp = await startFakeOidcProvider();
  t = await startTestPlatform(
    {
      PUBLIC_URL,
      IDP_CLIENT_ID: idp.clientId,
      IDP_CLIENT_SECRET: idp.clientSecret,
      IDP_ISSUER: idp.issuer,
      // the provider's discovery document names its jwks_uri, all the receiver reads from it
      IDP_RISC_CONFIG_URL: `${idp.issuer}/.well-known/openid-configuration`,
    },
    { securityEvents: { pollMs: 20 } },
  );
  t.platform.startWebJobs();
});
afterAll(async () => {
  await t?.close();
  await idp?.close();
});

/** The whole sign-in: GET /api/auth/idp, the provider's authorize, the callback. The callback's answer. */
async function signInWithIdp() {
  const start = await t.web.inject({ method: 'GET', url: '/api/auth/idp' });
  const cookie = String(
    ([] as unknown[]).concat(start.headers['set-cookie']).find((c) => String(c).startsWith('service-oauth-idp=')),
  ).split(';')[0]!;
  const atProvider = await fetch(String(start.headers.location), { redirect: 'manual' });
  const back = new URL(atProvider.headers.get('location')!);
  return t.web.inject({ method: 'GET', url: back.pathname + back.search, headers: { cookie } });
}

async function deliver(events: Record<string, unknown>) {
  const jti = randomUUID();
  const token = await idp.sign(
    { iss: idp.issuer, aud: idp.clientId, iat: Math.floor(Date.now() / 1000), jti, events },
    { typ: 'secevent+jwt' },
  );
  const res = await t.web.inject({
    method: 'POST',
    url: '/api/security/risc',
    payload: token,
    headers: { 'content-type': 'application/secevent+jwt' },
  });
  expect(res.statusCode).toBe(202);
  const end = Date.now() + 5000;
  while (
    (await t.database.db.kysely.selectFrom('risc_events').select('state').where('jti', '=', jti).executeTakeFirst())?.state !== 'done'
  ) {
    if (Date.now() > end) throw new Error('event not processed');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const sessionUser = async (cookie: string) =>
  (await t.web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie } })).json().user;

it('hijacking: the idp session ends at once and idp sign-in is refused until account-enabled; tokens-revoked drops the stored refresh token', async () => {
  idp.user = { sub: 'risc-e2e-sub', email: 'risc-e2e@example.com', email_verified: true, name: 'Risc E2E' };
  const first = await signInWithIdp();
  expect(first.headers.location).toBe('/dashboard');
  const cookie = `service-session=${sessionCookieFrom(first)}`;
  const user = await sessionUser(cookie);
  expect(user.email).toBe('risc-e2e@example.com');

  await deliver({
    [EVENT.accountDisabled]: { subject: { subject_type: 'iss-sub', iss: idp.issuer, sub: 'risc-e2e-sub' }, reason: 'hijacking' },
  });
  expect(await sessionUser(cookie)).toBeNull();
  const refused = await signInWithIdp();
  expect(refused.headers.location).toBe('/login?error=AccessDenied');

  await deliver({ [EVENT.accountEnabled]: { subject: { sub: 'risc-e2e-sub' } } });
  const again = await signInWithIdp();
  expect(again.headers.location).toBe('/dashboard');
  const link = () =>
    t.database.db.kysely
      .selectFrom('linked_accounts')
      .select('refresh_token_enc')
      .where('subject', '=', 'risc-e2e-sub')
      .executeTakeFirstOrThrow();
  expect((await link()).refresh_token_enc).not.toBeNull();

  await deliver({ [EVENT.tokensRevoked]: { subject: { sub: 'risc-e2e-sub' } } });
  expect((await link()).refresh_token_enc).toBeNull();
  expect(await sessionUser(`service-session=${sessionCookieFrom(again)}`)).toBeNull();
});
