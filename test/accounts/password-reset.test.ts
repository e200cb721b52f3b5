/**
 * Password reset by email (§4.18 "Password reset endpoints: not shown", designed in
 * docs/security.md "Password reset"; §4.1 sign-up password rules and sessions; §7 error bodies).
 * Mail goes over real SMTP to a local server (test/fakes/smtp.ts) whose messages the tests read.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/config/limits.ts';
import { COMMON_PASSWORD_MESSAGE } from '../../src/domains/accounts/password-policy.rules.ts';
import { RESET_NOT_SET_UP, RESET_REQUESTED, RESET_TOKEN_ERRORS } from '../../src/domains/accounts/password-reset.service.ts';
import { loggerOptions } from '../../src/http/shared/logging.ts';
import { sha256 } from '../../src/lib/crypto.ts';
import { createRedisRateLimiter } from '../../src/lib/rate-limiter.ts';
import { createPlatform } from '../../src/platform.ts';
import { type FakeSmtp, type ReceivedMail, startFakeSmtp } from '../fakes/smtp.ts';
import { signUp, startTestPlatform, TEST_SECRETS, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const REQUEST = '/api/auth/password-reset/request';
const CONFIRM = '/api/auth/password-reset/confirm';
const LINK = /(http:\/\/[^\s]+\/reset-password)\?token=([A-Za-z0-9_-]+)/;

let smtp: FakeSmtp;
let t: TestPlatform;
const logLines: string[] = [];
const logStream = new Writable({
  write(chunk, _enc, done) {
    logLines.push(String(chunk));
    done();
  },
});
let n = 0;
const freshEmail = () => `reset-${randomBytes(3).toString('hex')}${n++}@example.com`;
const ip = () => `198.51.100.${(n++ % 250) + 1}`;

const requestReset = (email: unknown, from = ip(), app = t.web) =>
  app.inject({ method: 'POST', url: REQUEST, payload: { email }, remoteAddress: from });
const confirm = (payload: object, app = t.web) => app.inject({ method: 'POST', url: CONFIRM, payload });
const sessionOf = (cookie: string, app = t.web) => app.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie } });
const login = (email: string, password: string, app = t.web) =>
  app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password }, remoteAddress: ip() });

/** Makes the user's links look `ms` older (their expiry is what tells when a link was mailed). */
const ageLinks = (userId: string, ms: number, db = t.database.db.kysely) =>
  db
    .updateTable('password_reset_tokens')
    .set({ expires_at: sql<Date>`expires_at - make_interval(secs => ${ms / 1000})` })
    .where('user_id', '=', userId)
    .execute();
const mailsTo = (email: string, server = smtp) => server.messages.filter((m) => m.to.includes(email));

/** Asks for a link for `email` and returns the token of the mail that arrives. */
async function mailedToken(email: string, app = t.web, server = smtp): Promise<{ token: string; mail: ReceivedMail }> {
  const before = new Set(server.messages);
  const res = await requestReset(email, ip(), app);
  expect(res.statusCode).toBe(200);
  const mail = await server.waitFor((m) => !before.has(m) && m.to.includes(email));
  const token = LINK.exec(mail.text)?.[2];
  if (!token) throw new Error(`no reset link in the mail: ${mail.text}`);
  return { token, mail };
}

beforeAll(async () => {
  smtp = await startFakeSmtp();
  t = await startTestPlatform(
    {
      SMTP_URL: smtp.url,
      MAIL_FROM: 'Agent platform <no-reply@platform.example>',
      REGISTER_RATE_LIMIT: '1000',
      PASSWORD_RESET_RATE_LIMIT: '1000',
      PASSWORD_RESET_EMAIL_RATE_LIMIT: '1000',
      LOG_LEVEL: 'trace',
    },
    // every line the platform logs, requests included, at the most talkative level, with the
    // options the apps use when they make their own logger (serializers, redaction)
    { logger: pino(loggerOptions('trace', 'json'), logStream) },
  );
});
afterAll(async () => {
  await t?.close();
  await smtp?.close();
});

describe('the whole flow through SMTP', () => {
  it('mail with a 30-minute single-use link → confirm → the new password signs in, the old one and every old session do not', async () => {
    const u = await signUp(t.web);
    const second = await login(u.email, u.password);
    const cookieB = `service-session=${/service-session=([^;]+)/.exec(String(second.headers['set-cookie']))![1]}`;
    // both sessions are live (and now cached by the session cache)
    expect((await sessionOf(u.cookie)).json().user.id).toBe(u.id);
    expect((await sessionOf(cookieB)).json().user.id).toBe(u.id);

    const before = Date.now();
    const res = await requestReset(u.email.toUpperCase());
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true, message: RESET_REQUESTED });
    const mail = await smtp.waitFor((m) => m.to.includes(u.email));
    expect(mail.user).toBe('mailer'); // SMTP_URL's credentials were used
    expect(mail.from).toBe('no-reply@platform.example');
    expect(mail.subject).toBe('Reset your password');
    const [, base, token] = LINK.exec(mail.text)!;
    expect(base).toBe(`${t.config.PUBLIC_URL}/reset-password`);
    expect(token!.length).toBeGreaterThanOrEqual(43); // 256 bits, base64url

    // stored only as its SHA-256, valid 30 minutes
    const rows = await t.database.db.kysely
      .selectFrom('password_reset_tokens')
      .innerJoin('users', 'users.id', 'password_reset_tokens.user_id')
      .select(['token_hash', 'expires_at', 'used_at', 'users.password_hash'])
      .where('users.id', '=', u.id)
      .execute();
    expect(rows).toHaveLength(1);
    expect(Buffer.compare(rows[0]!.token_hash, sha256(token!))).toBe(0);
    expect(rows[0]!.token_hash.toString('utf8')).not.toContain(token);
    const ttl = rows[0]!.expires_at.getTime() - before;
    expect(ttl).toBeGreaterThan(29.9 * 60_000);
    expect(ttl).toBeLessThan(30.1 * 60_000);
    const oldHash = rows[0]!.password_hash;

    const newPassword = 'a brand new passphrase';
    const ok = await confirm({ token, password: newPassword });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ ok: true });

    // every session of the user is refused at once (the cached ones included)
    expect((await sessionOf(u.cookie)).json()).toEqual({ user: null });
    expect((await sessionOf(cookieB)).json()).toEqual({ user: null });
    const left = await t.database.db.kysely.selectFrom('sessions').select('id').where('user_id', '=', u.id).execute();
    expect(left).toHaveLength(0);

    const stored = await t.database.db.kysely.selectFrom('users').select('password_hash').where('id', '=', u.id).executeTakeFirstOrThrow();
    expect(stored.password_hash).toMatch(/^\$argon2id\$/);
    expect(stored.password_hash).not.toBe(oldHash);
    expect((await login(u.email, u.password)).statusCode).toBe(401);
    expect((await login(u.email, newPassword)).statusCode).toBe(200);

    // single use
    const again = await confirm({ token, password: 'yet another passphrase' });
    expect(again.statusCode).toBe(400);
    expect(again.json()).toEqual({ error: RESET_TOKEN_ERRORS.used });
    expect((await login(u.email, newPassword)).statusCode).toBe(200);
  });

  it('a reset spends every other outstanding link of the user', async () => {
    const u = await signUp(t.web);
    const first = await mailedToken(u.email);
    await ageLinks(u.id, LIMITS.passwordResetResendMs); // a second link is mailed only once the resend interval is over
    const second = await mailedToken(u.email);
    expect(first.token).not.toBe(second.token);
    expect((await confirm({ token: second.token, password: 'the second link wins' })).statusCode).toBe(200);
    const stale = await confirm({ token: first.token, password: 'the first link lost' });
    expect(stale.statusCode).toBe(400);
    expect(stale.json()).toEqual({ error: RESET_TOKEN_ERRORS.used });
    expect((await login(u.email, 'the second link wins')).statusCode).toBe(200);
  });
});

describe('the request tells nothing about accounts', () => {
  it('an unknown email gets the same status and body, and no mail is sent', async () => {
    const known = await signUp(t.web);
    const unknown = freshEmail();
    const a = await requestReset(known.email);
    const b = await requestReset(unknown);
    expect(b.statusCode).toBe(a.statusCode);
    expect(b.body).toBe(a.body);
    expect(b.headers['content-length']).toBe(a.headers['content-length']);
    await smtp.waitFor((m) => m.to.includes(known.email));
    await t.platform.services.passwordReset.idle();
    expect(smtp.messages.some((m) => m.to.includes(unknown))).toBe(false);
  });

  it('an account without a password (wallet sign-in) gets the same 200 and no mail', async () => {
    const email = freshEmail();
    await t.database.db.kysely
      .insertInto('users')
      .values({ email, name: 'Wallet user', password_hash: null, referral_code: `W${randomBytes(4).toString('hex').toUpperCase()}` })
      .execute();
    const res = await requestReset(email);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true, message: RESET_REQUESTED });
    await t.platform.services.passwordReset.idle();
    expect(smtp.messages.some((m) => m.to.includes(email))).toBe(false);
    const users = await t.database.db.kysely.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow();
    const mine = await t.database.db.kysely.selectFrom('password_reset_tokens').select('id').where('user_id', '=', users.id).execute();
    expect(mine).toHaveLength(0);
  });

  it('bad input: 400 with a JSON error', async () => {
    for (const [email, error] of [
      [undefined, 'Email is required'],
      ['', 'Email is required'],
      ['not-an-email', 'Invalid email format'],
      [42, 'Email is required'],
    ] as const) {
      const res = await requestReset(email);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error });
    }
    const notJson = await t.web.inject({ method: 'POST', url: REQUEST, payload: '[1]', headers: { 'content-type': 'application/json' } });
    expect(notJson.statusCode).toBe(400);
    expect(typeof notJson.json().error).toBe('string');
  });
});

describe('links that cannot be used: 400 with a clear error', () => {
  it('unknown, expired and used tokens; the password is unchanged', async () => {
    const unknown = await confirm({ token: 'x'.repeat(43), password: 'a fine new password' });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json()).toEqual({ error: RESET_TOKEN_ERRORS.unknown });

    const u = await signUp(t.web);
    const { token } = await mailedToken(u.email);
    await t.database.db.kysely
      .updateTable('password_reset_tokens')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('token_hash', '=', sha256(token))
      .execute();
    const expired = await confirm({ token, password: 'a fine new password' });
    expect(expired.statusCode).toBe(400);
    expect(expired.json()).toEqual({ error: RESET_TOKEN_ERRORS.expired });
    expect((await login(u.email, u.password)).statusCode).toBe(200);
    expect((await sessionOf(u.cookie)).json().user.id).toBe(u.id);

    const tooLong = await confirm({ token: 'y'.repeat(129), password: 'a fine new password' });
    expect(tooLong.statusCode).toBe(400);
    expect(tooLong.json()).toEqual({ error: RESET_TOKEN_ERRORS.unknown });
  });

  it('the sign-up password rules with their wording; a refused password does not spend the link', async () => {
    const u = await signUp(t.web);
    const { token } = await mailedToken(u.email);
    const cases: [object, string][] = [
      [{ token, password: 'short' }, 'Password must be at least 8 characters'],
      [{ token, password: 'x'.repeat(257) }, 'Password must be at most 256 characters'],
      [{ token, password: 'password123' }, COMMON_PASSWORD_MESSAGE],
      [{ token }, 'Token and password are required'],
      [{ password: 'a fine new password' }, 'Token and password are required'],
      [{ token, password: '' }, 'Token and password are required'],
    ];
    for (const [payload, error] of cases) {
      const res = await confirm(payload);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error });
    }
    // the same texts as sign-up
    const signup = await t.web.inject({ method: 'POST', url: '/api/register', payload: { email: freshEmail(), password: 'short' } });
    expect(signup.json()).toEqual({ error: 'Password must be at least 8 characters' });
    expect((await confirm({ token, password: 'now a good password' })).statusCode).toBe(200);
  });
});

describe('concurrency', () => {
  it('10 parallel confirms of one link: exactly one succeeds, and its password is the one set', async () => {
    const u = await signUp(t.web);
    const { token } = await mailedToken(u.email);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => confirm({ token, password: `parallel password number ${i}` })));
    const winners = results.map((r, i) => [r, i] as const).filter(([r]) => r.statusCode === 200);
    expect(winners).toHaveLength(1);
    for (const r of results.filter((x) => x.statusCode !== 200)) {
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ error: RESET_TOKEN_ERRORS.used });
    }
    const winner = winners[0]![1];
    expect((await login(u.email, `parallel password number ${winner}`)).statusCode).toBe(200);
    expect((await login(u.email, `parallel password number ${(winner + 1) % 10}`)).statusCode).toBe(401);
  });
});

describe('rate limits (per IP, per email and IP) and the resend interval', () => {
  it('beyond PASSWORD_RESET_EMAIL_RATE_LIMIT for one email from one IP (known or not) and PASSWORD_RESET_RATE_LIMIT per IP: 429', async () => {
    await withTestPlatform(
      { SMTP_URL: smtp.url, PASSWORD_RESET_RATE_LIMIT: '3', PASSWORD_RESET_EMAIL_RATE_LIMIT: '2', REGISTER_RATE_LIMIT: '1000' },
      async (p) => {
        const u = await signUp(p.web);
        for (const email of [u.email, freshEmail()]) {
          const from = ip();
          expect((await requestReset(email, from, p.web)).statusCode).toBe(200);
          expect((await requestReset(email.toUpperCase(), from, p.web)).statusCode).toBe(200);
          const third = await requestReset(email, from, p.web);
          expect(third.statusCode).toBe(429);
          expect(third.json().error).toBe('Too many password reset requests; try again later');
          expect(third.json().retryAfter).toBeGreaterThan(0);
          // another caller is not refused for it
          expect((await requestReset(email, ip(), p.web)).statusCode).toBe(200);
        }
        const from = '192.0.2.77';
        for (let i = 0; i < 3; i++) expect((await requestReset(freshEmail(), from, p.web)).statusCode).toBe(200);
        const over = await requestReset(freshEmail(), from, p.web);
        expect(over.statusCode).toBe(429);
        expect(over.headers['retry-after']).toBeDefined();
        expect((await requestReset(freshEmail(), '192.0.2.78', p.web)).statusCode).toBe(200);
        await p.platform.services.passwordReset.idle();
        // three accepted requests for the account within the resend interval: one mail
        expect(mailsTo(u.email)).toHaveLength(1);
      },
    );
  });

  it('nobody can use up someone else’s resets: after an attacker’s flood for carol, her own request is answered and a live link is in her mailbox', async () => {
    // the default limits (10 per IP, 3 per email and IP per hour)
    await withTestPlatform({ SMTP_URL: smtp.url, REGISTER_RATE_LIMIT: '1000' }, async (p) => {
      const carol = await signUp(p.web, { email: `carol-${randomBytes(3).toString('hex')}@example.org` });
      const attacker = '203.0.113.66';
      const answers = [];
      for (let i = 0; i < 6; i++) answers.push((await requestReset(carol.email, attacker, p.web)).statusCode);
      expect(answers).toEqual([200, 200, 200, 429, 429, 429]); // the attacker's own IP, for this address
      await p.platform.services.passwordReset.idle();
      expect(mailsTo(carol.email)).toHaveLength(1); // and a flood mails her once

      // Carol, from her own IP: answered like anyone (same 200 and body), no 429
      const victim = '198.51.100.200';
      const hers = await requestReset(carol.email, victim, p.web);
      expect(hers.statusCode).toBe(200);
      expect(hers.json()).toEqual({ ok: true, message: RESET_REQUESTED });
      await p.platform.services.passwordReset.idle();
      // within the resend interval nothing new is mailed: the link in her mailbox is live and works
      expect(mailsTo(carol.email)).toHaveLength(1);
      const live = LINK.exec(mailsTo(carol.email)[0]!.text)![2]!;

      // past the resend interval, her request mails a new link
      await ageLinks(carol.id, LIMITS.passwordResetResendMs, p.database.db.kysely);
      expect((await requestReset(carol.email, victim, p.web)).statusCode).toBe(200);
      const fresh = await smtp.waitFor((m) => m.to.includes(carol.email) && !m.text.includes(live));
      const token = LINK.exec(fresh.text)![2]!;
      expect((await confirm({ token, password: 'carol keeps her account' }, p.web)).statusCode).toBe(200);
      expect((await login(carol.email, 'carol keeps her account', p.web)).statusCode).toBe(200);
      // the older link was spent by the reset
      expect((await confirm({ token: live, password: 'not again' }, p.web)).json()).toEqual({ error: RESET_TOKEN_ERRORS.used });
    });
  });

  it('parallel requests for one account from many IPs mail one link', async () => {
    const u = await signUp(t.web);
    const answers = await Promise.all(Array.from({ length: 8 }, () => requestReset(u.email)));
    for (const a of answers) expect(a.statusCode).toBe(200);
    await t.platform.services.passwordReset.idle();
    expect(mailsTo(u.email)).toHaveLength(1);
    const rows = await t.database.db.kysely.selectFrom('password_reset_tokens').select('id').where('user_id', '=', u.id).execute();
    expect(rows).toHaveLength(1);
  });
});

describe('without SMTP', () => {
  it('503 with a sentence; GET /api/features says reset is off (and on where SMTP_URL is set)', async () => {
    await withTestPlatform({}, async (p) => {
      const u = await signUp(p.web);
      const res = await requestReset(u.email, ip(), p.web);
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ error: RESET_NOT_SET_UP });
      expect((await p.web.inject({ method: 'GET', url: '/api/features' })).json().passwordReset).toBe(false);
    });
    expect((await t.web.inject({ method: 'GET', url: '/api/features' })).json().passwordReset).toBe(true);
  });

  it('an unreachable SMTP server: the request still answers 200 and the failure is logged without the link', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _e, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const dead = await startFakeSmtp();
    const url = dead.url;
    await dead.close();
    await withTestPlatform(
      { SMTP_URL: url, REGISTER_RATE_LIMIT: '1000' },
      { logger: pino(loggerOptions('trace', 'json'), sink) },
      async (p) => {
        const u = await signUp(p.web);
        expect((await requestReset(u.email, ip(), p.web)).statusCode).toBe(200);
        await p.platform.services.passwordReset.idle();
        expect(lines.join('')).toContain('password reset mail not sent');
        expect(lines.join('')).not.toContain('reset-password?token=');
        // the unsent link is forgotten: the next request does not wait out the resend interval
        const left = await p.database.db.kysely.selectFrom('password_reset_tokens').select('id').where('user_id', '=', u.id).execute();
        expect(left).toHaveLength(0);
      },
    );
  });
});

describe('the reset page', () => {
  it('/reset-password serves the dashboard with Referrer-Policy: no-referrer (its address holds the token)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dash-'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>dashboard</title>');
    await withTestPlatform({ DASHBOARD_DIR: dir }, async (p) => {
      const page = await p.web.inject({ method: 'GET', url: '/reset-password?token=abc' });
      expect(page.statusCode).toBe(200);
      expect(page.body).toContain('<title>dashboard</title>');
      expect(page.headers['referrer-policy']).toBe('no-referrer');
      expect((await p.web.inject({ method: 'GET', url: '/login' })).headers['referrer-policy']).toBe('same-origin');
    });
  });
});

describe('the token is never logged', () => {
  it('no mailed token appears in any log line (requests, the page address, the confirm body)', async () => {
    const u = await signUp(t.web);
    const { token } = await mailedToken(u.email);
    await t.web.inject({ method: 'GET', url: `/reset-password?token=${token}` });
    expect((await confirm({ token, password: 'logged? never' })).statusCode).toBe(200);
    await t.platform.services.passwordReset.idle();
    const tokens = smtp.messages.map((m) => LINK.exec(m.text)?.[2]).filter((x): x is string => !!x);
    expect(tokens.length).toBeGreaterThan(3);
    const all = logLines.join('');
    // the capture works: the requests were logged, their URLs included
    expect(all).toContain('/api/auth/password-reset/confirm');
    expect(all).toContain('/reset-password?token=REDACTED');
    for (const tok of tokens) expect(all).not.toContain(tok);
  });
});

describe.skipIf(!process.env.REDIS_URL)('across replicas (REDIS_URL)', () => {
  it('a reset on one replica ends the sessions another replica has cached; the per-email-and-IP limit is shared', async () => {
    const redisUrl = process.env.REDIS_URL!;
    const prefix = `test-reset-${randomBytes(4).toString('hex')}:`;
    const env = { SMTP_URL: smtp.url, REDIS_URL: redisUrl, REGISTER_RATE_LIMIT: '1000', PASSWORD_RESET_EMAIL_RATE_LIMIT: '3' };
    const a = await startTestPlatform(env, { rateLimiter: createRedisRateLimiter(redisUrl, prefix) });
    // replica b: its own process state (session cache, rate limiter client) over a's database
    const b = createPlatform({
      config: a.config,
      db: a.database.db,
      secrets: TEST_SECRETS,
      logger: pino({ level: 'silent' }),
      rateLimiter: createRedisRateLimiter(redisUrl, prefix),
    });
    const bWeb = await b.buildWebApp();
    try {
      const u = await signUp(a.web);
      // b has the session cached (its cache keeps an entry 5 s unless evicted)
      expect((await sessionOf(u.cookie, bWeb)).json().user.id).toBe(u.id);
      const { token } = await mailedToken(u.email, a.web); // the 1st request for this email
      expect((await confirm({ token, password: 'replicas agree on this' }, a.web)).statusCode).toBe(200);
      const started = Date.now();
      let user: unknown = 'cached';
      while (Date.now() - started < 1000) {
        user = (await sessionOf(u.cookie, bWeb)).json().user;
        if (user === null) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(user).toBeNull();
      expect(Date.now() - started).toBeLessThan(1000); // well inside the cache's 5 s

      // one caller's requests for the address: two on b, the third on a, the 4th on b is refused, whichever replica counts
      const from = '192.0.2.99';
      expect((await requestReset(u.email, from, bWeb)).statusCode).toBe(200);
      expect((await requestReset(u.email, from, bWeb)).statusCode).toBe(200);
      expect((await requestReset(u.email, from, a.web)).statusCode).toBe(200);
      expect((await requestReset(u.email, from, bWeb)).statusCode).toBe(429);
    } finally {
      await bWeb.close();
      await b.close();
      await a.close();
    }
  });
});
