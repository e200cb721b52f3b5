/**
 * Pre-registration takeover (docs/identity.md "What a sign-in does", docs/admin.md; §4.1
 * identity-provider and code-host sign-in, §5 admin check): anyone can register someone else's
 * address with a password before its owner arrives. The owner's first sign-in with the identity
 * provider (test/fakes/oidc-provider.ts) or the code host (test/fakes/codehost.ts) proves the
 * address; from then on the account is the prover's alone: the registrant's sessions and API keys
 * end (cached ones too), their password no longer signs in, and the owner is told on the dashboard. An
 * `ADMIN_EMAILS` address never makes an admin of an account whose password predates its
 * verification. The person who did register with a password gets back in through the provider and
 * sets a password again with a reset mailed over SMTP (test/fakes/smtp.ts).
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { passwordClearedNotice } from '../../src/domains/accounts/accounts.service.ts';
import { type FakeCodehost, startFakeCodehost } from '../fakes/codehost.ts';
import { type FakeOidcProvider, startFakeOidcProvider } from '../fakes/oidc-provider.ts';
import { type FakeSmtp, startFakeSmtp } from '../fakes/smtp.ts';
import { sessionCookieFrom, signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const PUBLIC_URL = 'http://app.test';
const ATTACKER_PASSWORD = 'Attacker-chosen-pw-77';
const LINK = /reset-password\?token=([A-Za-z0-9_-]+)/;
let t: TestPlatform;
let idp: FakeOidcProvider;
let host: FakeCodehost;
let smtp: FakeSmtp;
let n = 0;

beforeAll(async () => {
  [idp, host, smtp] = await Promise.all([startFakeOidcProvider(), startFakeCodehost(), startFakeSmtp()]);
  t = await startTestPlatform({
    PUBLIC_URL,
    REGISTER_RATE_LIMIT: '1000',
    PASSWORD_RESET_RATE_LIMIT: '1000',
    PASSWORD_RESET_EMAIL_RATE_LIMIT: '1000',
    SMTP_URL: smtp.url,
    ADMIN_EMAILS: 'boss@example.org,legacy-boss@example.org',
    IDP_CLIENT_ID: idp.clientId,
    IDP_CLIENT_SECRET: idp.clientSecret,
    IDP_ISSUER: idp.issuer,
    CODEHOST_CLIENT_ID: host.clientId,
    CODEHOST_CLIENT_SECRET: host.clientSecret,
    CODEHOST_URL: host.url,
    CODEHOST_API_URL: host.apiUrl,
  });
});
afterAll(async () => {
  await t?.close();
  await Promise.all([idp?.close(), host?.close(), smtp?.close()]);
});
beforeEach(() => {
  n++;
});

const setCookies = (res: { headers: Record<string, unknown> }): string[] =>
  ([] as unknown[]).concat(res.headers['set-cookie'] ?? []).filter((c): c is string => typeof c === 'string');

/** A whole provider sign-in in one browser: start, the provider's consent, the callback. The session token. */
async function providerSignIn(provider: 'idp' | 'codehost'): Promise<string> {
  const start = await t.web.inject({ method: 'GET', url: `/api/auth/${provider}` });
  expect(start.statusCode).toBe(302);
  const state = setCookies(start).find((c) => c.startsWith(`service-oauth-${provider}=`));
  if (!state) throw new Error('no state cookie');
  const atProvider = await fetch(String(start.headers.location), { redirect: 'manual' });
  const back = new URL(atProvider.headers.get('location')!);
  const res = await t.web.inject({ method: 'GET', url: back.pathname + back.search, headers: { cookie: state.split(';')[0]! } });
  expect(res.statusCode).toBe(302);
  expect(res.headers.location).toBe('/dashboard');
  return sessionCookieFrom(res);
}
function idpSignIn(email: string): Promise<string> {
  idp.user = { sub: `idp-owner-${n}`, email, email_verified: true, name: 'The Owner' };
  return providerSignIn('idp');
}
function codehostSignIn(email: string): Promise<string> {
  host.user = { id: 5000 + n, login: `owner${n}`, name: 'The Owner', emails: [{ email, primary: true, verified: true }] };
  return providerSignIn('codehost');
}

const session = async (token: string) =>
  (await t.web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: `service-session=${token}` } })).json().user;
const login = (email: string, password: string) => t.web.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password } });
const userRow = (id: string) =>
  t.database.db.kysely
    .selectFrom('users')
    .select(['password_hash', 'email_verified', 'password_predates_verification'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
const sessionsOf = (id: string) => t.database.db.kysely.selectFrom('sessions').select('id').where('user_id', '=', id).execute();
const asUser = (token: string) => ({ cookie: `service-session=${token}` });

/** Asks for a reset link for `email` and returns the token of the mail that arrives. */
async function mailedToken(email: string): Promise<string> {
  const before = new Set(smtp.messages);
  const res = await t.web.inject({ method: 'POST', url: '/api/auth/password-reset/request', payload: { email } });
  expect(res.statusCode).toBe(200);
  const mail = await smtp.waitFor((m) => !before.has(m) && m.to.includes(email));
  return LINK.exec(mail.text)![1]!;
}
const confirmReset = (token: string, password: string) =>
  t.web.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token, password } });

describe('the owner proves the address with the identity provider', () => {
  it('the registrant’s sessions end (the cached one too), their password fails; the owner is in and told on the dashboard', async () => {
    const email = `victim${n}@corp.example`;
    const attacker = await signUp(t.web, { email, password: ATTACKER_PASSWORD });
    // the attacker's session is live and now in the session cache; an API key of theirs too
    expect((await session(attacker.token)).id).toBe(attacker.id);
    expect((await session(attacker.token)).notice).toBeUndefined();
    const made = await t.web.inject({ method: 'POST', url: '/api/keys', headers: asUser(attacker.token), payload: { name: 'mine' } });
    expect(made.statusCode, made.body).toBe(201);
    const key = made.json().key as string;
    const viaKey = () => t.web.inject({ method: 'GET', url: '/api/agents', headers: { authorization: `Bearer ${key}` } });
    expect((await viaKey()).statusCode).toBe(200);

    const victim = await idpSignIn(email);

    expect(await session(attacker.token)).toBeNull();
    // the key made before the proof is gone too (it was cached as valid a moment ago)
    expect((await viaKey()).statusCode).toBe(401);
    expect(await t.database.db.kysely.selectFrom('api_keys').select('id').where('user_id', '=', attacker.id).execute()).toEqual([]);
    const again = await login(email, ATTACKER_PASSWORD);
    expect(again.statusCode).toBe(401);
    expect(again.json()).toEqual({ error: 'Invalid credentials' });
    expect(await userRow(attacker.id)).toEqual({ password_hash: null, email_verified: true, password_predates_verification: false });

    const me = await session(victim);
    expect(me).toEqual({ id: attacker.id, name: expect.any(String), email, isAdmin: false, notice: passwordClearedNotice('idp') });
    expect(me.notice.message).toContain(
      'Someone had registered this email with a password before you proved it with the identity provider',
    );
    expect(me.notice.message).toContain('no longer works');
    expect(await sessionsOf(attacker.id)).toHaveLength(1); // the owner's only
    const linked = await t.web.inject({ method: 'GET', url: '/api/auth/linked-accounts', headers: asUser(victim) });
    expect(linked.json().accounts).toEqual([expect.objectContaining({ provider: 'idp', email })]);
  });

  it('the notice stays, on every session, until dismissed (at once, whatever the cache holds); dismissing needs a session', async () => {
    const email = `dismiss${n}@corp.example`;
    await signUp(t.web, { email, password: ATTACKER_PASSWORD });
    const first = await idpSignIn(email);
    expect((await session(first)).notice?.kind).toBe('password-cleared');
    const second = await idpSignIn(email); // a later sign-in: no new proof, the notice is still there
    expect((await session(second)).notice?.provider).toBe('idp');

    expect((await t.web.inject({ method: 'DELETE', url: '/api/auth/notice' })).statusCode).toBe(401);
    const dismissed = await t.web.inject({ method: 'DELETE', url: '/api/auth/notice', headers: asUser(second) });
    expect(dismissed.statusCode).toBe(200);
    expect(dismissed.json()).toEqual({ ok: true });
    // the §4.1 shape again, on both sessions (the first was cached with the notice)
    expect(Object.keys(await session(first)).sort()).toEqual(['email', 'id', 'isAdmin', 'name']);
    expect((await session(second)).notice).toBeUndefined();
    expect((await t.web.inject({ method: 'DELETE', url: '/api/auth/notice', headers: asUser(second) })).statusCode).toBe(200);
  });

  it('a password sign-in whose check was under way when the address was proved opens no session', async () => {
    const email = `race${n}@corp.example`;
    const attacker = await signUp(t.web, { email, password: ATTACKER_PASSWORD });
    // What the first proof's transaction does (external-signin.service.ts), held open by hand: the
    // attacker's sign-in reads the old hash (committed), checks it, and tries to open its session
    // in the middle of it. Without the row lock its session would be inserted after the delete
    // and outlive the proof.
    const client = await t.database.db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('UPDATE users SET email_verified = true, password_hash = NULL WHERE id = $1', [attacker.id]);
      await client.query('DELETE FROM sessions WHERE user_id = $1', [attacker.id]);
      let settled = false;
      const attempt = login(email, ATTACKER_PASSWORD).finally(() => {
        settled = true;
      });
      // until the sign-in waits for the row lock (or, without it, has finished)
      for (let i = 0; i < 200 && !settled; i++) {
        const waiting = await t.database.db.pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%insert into "sessions"%'`,
        );
        if (waiting.rowCount) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      await client.query('COMMIT');
      const res = await attempt;
      expect(res.statusCode).toBe(401);
      if (res.statusCode === 200) expect(await session(sessionCookieFrom(res))).toBeNull();
      expect(await sessionsOf(attacker.id)).toHaveLength(0);
    } finally {
      client.release();
    }
  });

  it('parallel first sign-ins of the owner: one proof, every one of the owner’s sessions lives', async () => {
    const email = `parallel${n}@corp.example`;
    const attacker = await signUp(t.web, { email, password: ATTACKER_PASSWORD });
    idp.user = { sub: `idp-owner-${n}`, email, email_verified: true, name: 'The Owner' };
    const tokens = await Promise.all(Array.from({ length: 4 }, () => providerSignIn('idp')));
    for (const token of tokens) expect((await session(token))?.id).toBe(attacker.id);
    expect(await session(attacker.token)).toBeNull();
    expect(await sessionsOf(attacker.id)).toHaveLength(4);
  });

  it('a later proof of an address already verified clears nothing: the password its owner set stays', async () => {
    const email = `kept${n}@corp.example`;
    await signUp(t.web, { email, password: ATTACKER_PASSWORD });
    const owner = await idpSignIn(email);
    await t.web.inject({ method: 'DELETE', url: '/api/auth/notice', headers: asUser(owner) });
    expect((await confirmReset(await mailedToken(email), 'the owner’s own password')).statusCode).toBe(200);
    // another provider proves the same address: already verified, so nothing is cleared or told
    const viaHost = await codehostSignIn(email);
    expect((await session(viaHost)).notice).toBeUndefined();
    expect((await login(email, 'the owner’s own password')).statusCode).toBe(200);
  });
});

describe('ADMIN_EMAILS', () => {
  it('the boss’s sign-in makes the boss an admin; whoever registered boss@ first can no longer sign in', async () => {
    const attacker = await signUp(t.web, { email: 'boss@example.org', password: 'Mallory-owns-this-1' });
    expect((await session(attacker.token)).isAdmin).toBe(false); // unverified: no admin

    const boss = await idpSignIn('boss@example.org');
    expect((await session(boss)).isAdmin).toBe(true);
    expect((await t.web.inject({ method: 'GET', url: '/api/admin/users', headers: asUser(boss) })).statusCode).toBe(200);

    expect((await login('boss@example.org', 'Mallory-owns-this-1')).statusCode).toBe(401);
    expect(await session(attacker.token)).toBeNull();
    const adminCall = await t.web.inject({ method: 'GET', url: '/api/admin/users', headers: { cookie: attacker.cookie } });
    expect(adminCall.statusCode).toBe(401);
  });

  it('an account whose password predates its verification is no admin however it was verified (sessions, API keys); a password set after is', async () => {
    const legacy = await signUp(t.web, { email: 'legacy-boss@example.org', password: 'Set-before-any-proof-1' });
    // verified by other means, the password kept (as accounts verified before migration 215 were)
    await t.database.db.kysely.updateTable('users').set({ email_verified: true }).where('id', '=', legacy.id).execute();
    expect(await userRow(legacy.id)).toMatchObject({ email_verified: true, password_predates_verification: true });
    const signedIn = sessionCookieFrom(await login('legacy-boss@example.org', 'Set-before-any-proof-1'));
    expect((await session(signedIn)).isAdmin).toBe(false);
    expect((await t.web.inject({ method: 'GET', url: '/api/admin/users', headers: asUser(signedIn) })).statusCode).toBe(403);
    const created = await t.web.inject({ method: 'POST', url: '/api/keys', headers: asUser(signedIn), payload: { name: 'k' } });
    expect(created.statusCode).toBe(201);
    const apiKey = created.json().key as string;
    const validate = () => t.web.inject({ method: 'POST', url: '/api/keys/validate', headers: asUser(signedIn), payload: { apiKey } });
    // an admin's key gets the network plan's features (keys.service.ts); this one does not
    expect((await validate()).json().features).not.toContain('unlimited_agents');

    // the verified owner sets a password through a reset: now the address counts
    expect((await confirmReset(await mailedToken('legacy-boss@example.org'), 'Set-after-the-proof-2')).statusCode).toBe(200);
    expect(await userRow(legacy.id)).toMatchObject({ password_predates_verification: false });
    const after = sessionCookieFrom(await login('legacy-boss@example.org', 'Set-after-the-proof-2'));
    expect((await session(after)).isAdmin).toBe(true);
    const key = await t.web.inject({ method: 'POST', url: '/api/keys/validate', headers: asUser(after), payload: { apiKey } });
    expect(key.json().features).toContain('unlimited_agents');
  });
});

describe('the person who did register with a password', () => {
  it('gets in with the provider and sets a password again through a reset: the new password signs in', async () => {
    const email = `own${n}@corp.example`;
    const me = await signUp(t.web, { email, password: 'my first password' });
    const viaIdp = await idpSignIn(email);
    expect((await session(viaIdp)).id).toBe(me.id);
    expect((await login(email, 'my first password')).statusCode).toBe(401);

    // no password now, but a proved address: the reset mail comes
    const before = new Set(smtp.messages);
    const token = await mailedToken(email);
    const mail = smtp.messages.find((m) => !before.has(m) && m.to.includes(email))!;
    expect(mail.subject).toBe('Set a password');
    expect((await confirmReset(token, 'my second password')).statusCode).toBe(200);
    const back = await login(email, 'my second password');
    expect(back.statusCode).toBe(200);
    expect((await session(sessionCookieFrom(back))).id).toBe(me.id);
    // and the provider still signs in to the same account
    expect((await session(await idpSignIn(email))).id).toBe(me.id);
  });
});

describe('the owner proves the address with the code host', () => {
  it('the registrant’s sessions end, their password fails; the owner is in and told, naming the code host', async () => {
    const email = `octovictim${n}@corp.example`;
    const attacker = await signUp(t.web, { email, password: ATTACKER_PASSWORD });
    expect((await session(attacker.token)).id).toBe(attacker.id);

    const victim = await codehostSignIn(email);

    expect(await session(attacker.token)).toBeNull();
    expect((await login(email, ATTACKER_PASSWORD)).statusCode).toBe(401);
    const me = await session(victim);
    expect(me.id).toBe(attacker.id);
    expect(me.notice).toEqual(passwordClearedNotice('codehost'));
    expect(me.notice.message).toContain('before you proved it with the code host');
    expect(await userRow(attacker.id)).toMatchObject({ password_hash: null, email_verified: true });
    const count = await t.database.db.kysely
      .selectFrom('users')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where(sql<string>`lower(email)`, '=', email)
      .executeTakeFirstOrThrow();
    expect(Number(count.n)).toBe(1);

    // the same person sets a password again through a reset
    expect((await confirmReset(await mailedToken(email), 'octo owner password')).statusCode).toBe(200);
    expect((await login(email, 'octo owner password')).statusCode).toBe(200);
  });
});
