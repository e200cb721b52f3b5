/**
 * A password reset without SMTP (docs/admin.md "A password reset link without email"): the sign-in
 * page tells a user to ask the operator for a reset link, and the operator can make one —
 * POST /api/admin/users/:id/reset-link (admins) and `npm run admin -- reset-link <email>` answer a
 * one-time link of the same machinery as the mailed ones: it sets a new password once, ends every
 * session of the user, and a newer link makes the older one stop working. Non-admins 403, signed
 * out 401, an unknown user 404, a wallet account 409; the link never reaches the log. With SMTP,
 * a live admin link does not stop the user's own mailed reset.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESET_NOT_SET_UP } from '../../src/domains/accounts/password-reset.service.ts';
import { type FakeSmtp, startFakeSmtp } from '../fakes/smtp.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const root = join(import.meta.dirname, '..', '..');
const LINK = /^(http:\/\/[^/\s]+)\/reset-password\?token=([A-Za-z0-9_-]{43})$/;

let logged = '';
const sink = new Writable({
  write(chunk, _enc, done) {
    logged += String(chunk);
    done();
  },
});

let t: TestPlatform;
let admin: Awaited<ReturnType<typeof signUp>>;

beforeAll(async () => {
  // no SMTP_URL: the server this is for
  t = await startTestPlatform({ ADMIN_EMAILS: '', REGISTER_RATE_LIMIT: '1000' }, { logger: pino({ level: 'info' }, sink) });
  admin = await signUp(t.web);
  await t.platform.services.admin.setAdminByEmail(admin.email, true);
});
afterAll(async () => {
  await t?.close();
});

const issue = (userId: string, cookie = admin.cookie) =>
  t.web.inject({ method: 'POST', url: `/api/admin/users/${userId}/reset-link`, headers: cookie ? { cookie } : {} });
const confirm = (token: string, password: string) =>
  t.web.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token, password } });
const login = (email: string, password: string) => t.web.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password } });
const me = (cookie: string) => t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie } });

describe('POST /api/admin/users/:id/reset-link', () => {
  it('without SMTP the user is told to ask the operator for a reset link, and the admin can make one that works once', async () => {
    const u = await signUp(t.web);
    const asked = await t.web.inject({ method: 'POST', url: '/api/auth/password-reset/request', payload: { email: u.email } });
    expect([asked.statusCode, asked.json().error]).toEqual([503, RESET_NOT_SET_UP]);
    expect(RESET_NOT_SET_UP).toMatch(/ask its operator for a password reset link/);

    const res = await issue(u.id);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body).toEqual({ link: expect.stringMatching(LINK), email: u.email, expiresAt: expect.any(String) });
    const hours = (Date.parse(body.expiresAt) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(23.9);
    expect(hours).toBeLessThanOrEqual(24);
    const token = LINK.exec(body.link)![2]!;
    expect(logged).toContain('admin issued a password reset link');
    expect(logged).not.toContain(token);

    expect((await confirm(token, 'a brand new passphrase')).statusCode).toBe(200);
    expect((await confirm(token, 'yet another passphrase')).json().error).toMatch(/already been used/);
    expect((await login(u.email, 'a brand new passphrase')).statusCode).toBe(200);
    expect((await login(u.email, u.password)).statusCode).toBe(401);
    // the sessions the user had are over
    expect((await me(u.cookie)).statusCode).toBe(401);
  });

  it('a newer link makes the older one stop working', async () => {
    const u = await signUp(t.web);
    const first = LINK.exec((await issue(u.id)).json().link)![2]!;
    const second = LINK.exec((await issue(u.id)).json().link)![2]!;
    expect((await confirm(first, 'a brand new passphrase')).json().error).toMatch(/already been used/);
    expect((await confirm(second, 'a brand new passphrase')).statusCode).toBe(200);
  });

  it('401 signed out, 403 for a non-admin (even for their own account), 404 unknown, 400 bad id, 409 for a wallet account: no link', async () => {
    const u = await signUp(t.web);
    expect((await issue(u.id, '')).statusCode).toBe(401);
    const self = await issue(u.id, u.cookie);
    expect([self.statusCode, self.json().code]).toEqual([403, 'ADMIN_REQUIRED']);
    expect((await issue(randomUUID())).statusCode).toBe(404);
    expect((await issue('not-a-uuid')).statusCode).toBe(400);
    const wallet = randomUUID();
    await sql`INSERT INTO users (id, email, name, referral_code) VALUES (${wallet}, ${`0x${'a'.repeat(40)}@wallet.local`}, 'wallet', 'WALLET-RESET')`.execute(
      t.database.db.kysely,
    );
    const refused = await issue(wallet);
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error).toMatch(/wallet/);
    const links = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM password_reset_tokens WHERE user_id IN (${u.id}, ${wallet})`.execute(t.database.db.kysely);
    expect(links.rows[0]!.n).toBe(0);
  });
});

describe('npm run admin -- reset-link', () => {
  const run = (...args: string[]) =>
    spawnSync(process.execPath, ['scripts/admin.ts', ...args], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: t.database.url,
        PUBLIC_URL: 'http://platform.example:3000',
        LOG_LEVEL: 'silent',
        WALLET_ENCRYPTION_KEY: 'ab'.repeat(32),
        SECRETS_ENCRYPTION_KEY: 'cd'.repeat(32),
      },
    });

  it('prints a one-time link for the account (any case of its email) that sets a new password; an unknown email is refused', async () => {
    const u = await signUp(t.web);
    const ok = run('reset-link', u.email.toUpperCase());
    expect(ok.stderr).toBe('');
    expect(ok.status).toBe(0);
    expect(ok.stdout).toMatch(
      new RegExp(
        `^Password reset link for ${u.email} \\(works once, until \\S+; .*\\)\\. Give it to them yourself: http://platform\\.example:3000/reset-password\\?token=`,
      ),
    );
    const token = /token=([A-Za-z0-9_-]{43})\s*$/.exec(ok.stdout)![1]!;
    expect((await confirm(token, 'set from the shell link')).statusCode).toBe(200);
    expect((await login(u.email, 'set from the shell link')).statusCode).toBe(200);

    const unknown = run('reset-link', 'nobody@example.com');
    expect([unknown.status, unknown.stderr.trim()]).toEqual([1, 'No account with the email nobody@example.com']);
    expect(run('reset-link').status).toBe(2);
  });
});

describe('with SMTP, a live admin link does not hold back the mailed reset', () => {
  let smtp: FakeSmtp;
  let m: TestPlatform;
  beforeAll(async () => {
    smtp = await startFakeSmtp();
    m = await startTestPlatform({ SMTP_URL: smtp.url, ADMIN_EMAILS: '', REGISTER_RATE_LIMIT: '1000' });
  });
  afterAll(async () => {
    await m?.close();
    await smtp?.close();
  });

  it('the user asks for a mail after the admin made a link: the mail comes', async () => {
    const boss = await signUp(m.web);
    await m.platform.services.admin.setAdminByEmail(boss.email, true);
    const u = await signUp(m.web);
    const res = await m.web.inject({ method: 'POST', url: `/api/admin/users/${u.id}/reset-link`, headers: { cookie: boss.cookie } });
    expect(res.statusCode).toBe(200);
    const asked = await m.web.inject({ method: 'POST', url: '/api/auth/password-reset/request', payload: { email: u.email } });
    expect(asked.statusCode).toBe(200);
    const mail = await smtp.waitFor((x) => x.to.includes(u.email));
    expect(mail.text).toMatch(/reset-password\?token=/);
  });
});
