/**
 * The legacy security event receiver POST /api/auth/idp/risc (§4.1, §6): the three-part check,
 * then the primary receiver's issuer and signature checks; users by the email in `sub`; its event
 * list. Tokens from a local transmitter with its own JWKS (test/fakes/risc-issuer.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/http/shared/base-app.ts';
import { EVENT, type FakeRiscIssuer, startFakeRiscIssuer } from '../fakes/risc-issuer.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
let issuer: FakeRiscIssuer;

beforeAll(async () => {
  issuer = await startFakeRiscIssuer({ audiences: ['web-client.apps.example'] });
  t = await startTestPlatform(
    {
      REGISTER_RATE_LIMIT: '1000',
      IDP_ISSUER: issuer.issuer,
      IDP_CLIENT_ID: 'web-client.apps.example',
      IDP_RISC_CONFIG_URL: issuer.configUrl,
    },
    { securityEvents: { pollMs: 20 } },
  );
  t.platform.startWebJobs();
});
afterAll(async () => {
  await t?.close();
  await issuer?.close();
});

const post = (web: App, token: string, url: string) =>
  web.inject({ method: 'POST', url, payload: token, headers: { 'content-type': 'application/secevent+jwt' } });
const signedIn = async (web: App, cookie: string) =>
  (await web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie } })).json().user !== null;
async function processed(jti: string) {
  const end = Date.now() + 5000;
  while (
    (await t.database.db.kysely.selectFrom('risc_events').select('state').where('jti', '=', jti).executeTakeFirst())?.state !== 'done'
  ) {
    if (Date.now() > end) throw new Error(`event ${jti} not processed`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('legacy receiver POST /api/auth/idp/risc (§6: users by email in sub)', () => {
  it('400 unless three dot-separated parts; an unsigned or foreign token is refused too', async () => {
    for (const body of ['', 'a.b', 'a.b.c.d']) {
      const res = await post(t.web, body, '/api/auth/idp/risc');
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(/three dot-separated parts/);
    }
    expect((await post(t.web, await issuer.sign({ alg: 'none', aud: null }), '/api/auth/idp/risc')).statusCode).toBe(400);
    expect((await post(t.web, await issuer.sign({ iss: 'https://evil.example', aud: null }), '/api/auth/idp/risc')).statusCode).toBe(400);
  });

  it.each(['account-compromised', 'account-disabled', 'sessions-revoked', 'identifier-changed'])(
    '%s revokes every session',
    async (name) => {
      const u = await signUp(t.web);
      const jti = crypto.randomUUID();
      const token = await issuer.sign({
        jti,
        aud: null,
        claims: { sub: u.email },
        events: { [`${EVENT.verification.replace('verification', name)}`]: {} },
      });
      const res = await post(t.web, token, '/api/auth/idp/risc');
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ ok: true });
      await processed(jti);
      expect(await signedIn(t.web, u.cookie)).toBe(false);
    },
  );

  it('account-enabled does nothing; a token without jti is deduplicated by its hash', async () => {
    const u = await signUp(t.web);
    const token = await issuer.sign({ jti: null, aud: null, claims: { sub: u.email }, events: { 'account-enabled': {} } });
    expect((await post(t.web, token, '/api/auth/idp/risc')).statusCode).toBe(200);
    expect((await post(t.web, token, '/api/auth/idp/risc')).statusCode).toBe(200);
    const rows = await t.database.db.kysely.selectFrom('risc_events').selectAll().where('legacy_email', '=', u.email).execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.jti).toMatch(/^sha256:/);
    await processed(rows[0]!.jti);
    expect(await signedIn(t.web, u.cookie)).toBe(true);
  });
});
