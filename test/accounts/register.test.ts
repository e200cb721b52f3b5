/**
 * §4.1 POST /api/register: status codes and bodies (201, 400, 409), referral credit to both
 * users, and the §2 User defaults (name defaults to the email; email case-insensitive).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/config/limits.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
let n = 0;
const freshEmail = () => `reg${Date.now().toString(36)}${n++}@example.com`;
const register = (payload: unknown, headers: Record<string, string> = {}) =>
  t.web.inject({ method: 'POST', url: '/api/register', payload: payload as object, headers });
const login = (email: string, password: string) => t.web.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password } });
const cookieOf = (res: { headers: Record<string, unknown> }) => {
  const c = ([] as unknown[]).concat(res.headers['set-cookie']).find((x) => typeof x === 'string' && x.startsWith('service-session='));
  return (c as string).split(';')[0]!;
};
const profile = async (email: string, password: string) => {
  const res = await t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie: cookieOf(await login(email, password)) } });
  expect(res.statusCode).toBe(200);
  return res.json() as { id: string; email: string; name: string; plan: string; credits: number; twoFactorEnabled: boolean };
};
const referralCodeOf = async (userId: string) =>
  (await t.database.db.kysely.selectFrom('users').select('referral_code').where('id', '=', userId).executeTakeFirstOrThrow()).referral_code;

beforeAll(async () => {
  // the per-IP sign-up limit is tested in bot-and-rate-limit.test.ts; here it must not interfere
  t = await startTestPlatform({ REGISTER_RATE_LIMIT: '1000' });
});
afterAll(() => t.close());

describe('§4.1 POST /api/register → 201', () => {
  it('returns exactly {id, email, name}; name defaults to the email (§2 User); no session is created', async () => {
    const email = freshEmail();
    const res = await register({ email, password: 'Tr1cky-horse-battery' });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['email', 'id', 'name']);
    expect(body).toEqual({ id: expect.any(String), email, name: email });
    // "No session is created; call login afterwards."
    expect(res.headers['set-cookie']).toBeUndefined();
    const sessions = await t.database.db.kysely.selectFrom('sessions').select('id').where('user_id', '=', body.id).execute();
    expect(sessions).toHaveLength(0);
  });

  it('keeps a given name and stores the password as argon2id, never in clear', async () => {
    const email = freshEmail();
    const res = await register({ email, password: 'Tr1cky-horse-battery', name: 'Ada Lovelace' });
    expect(res.statusCode).toBe(201);
    expect(res.json().name).toBe('Ada Lovelace');
    const row = await t.database.db.kysely
      .selectFrom('users')
      .select('password_hash')
      .where('id', '=', res.json().id)
      .executeTakeFirstOrThrow();
    expect(row.password_hash).toMatch(/^\$argon2id\$/);
    expect(row.password_hash).not.toContain('Tr1cky-horse-battery');
  });

  it('a new user has the §2 defaults (plan solo, no credits, no 2FA) and can log in afterwards', async () => {
    const email = freshEmail();
    const reg = await register({ email, password: 'Tr1cky-horse-battery' });
    const p = await profile(email, 'Tr1cky-horse-battery');
    expect(p).toEqual({
      id: reg.json().id,
      email,
      name: email,
      plan: 'solo',
      credits: 0,
      twoFactorEnabled: false,
      referralCode: expect.stringMatching(/^[A-Z0-9]{8}$/),
    });
  });

  it('a password of exactly the §8 minimum (8) is accepted', async () => {
    const res = await register({ email: freshEmail(), password: 'x'.repeat(LIMITS.passwordMinLength) });
    expect(res.statusCode).toBe(201);
  });
});

describe('§4.1 POST /api/register → 400', () => {
  it.each([
    ['missing email', { password: 'Tr1cky-horse-battery' }],
    ['missing password', { email: 'nopass@example.com' }],
    ['empty email', { email: '', password: 'Tr1cky-horse-battery' }],
    ['empty password', { email: 'emptypass@example.com', password: '' }],
    ['empty object', {}],
  ])('%s → 400 with an error string', async (_label, payload) => {
    const res = await register(payload);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: expect.stringMatching(/required/i) });
  });

  it.each(['not-an-email', 'a@', '@example.com', 'a b@example.com', 'user@@example.com'])(
    'invalid email format %j → 400',
    async (email) => {
      const res = await register({ email, password: 'Tr1cky-horse-battery' });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(/email/i);
    },
  );

  it('a password shorter than 8 characters (§8) → 400', async () => {
    const res = await register({ email: freshEmail(), password: 'x'.repeat(LIMITS.passwordMinLength - 1) });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/password/i);
  });

  it.each([
    ['with a space', 'ABC DEF'],
    ['with punctuation', 'ABC!'],
    ['with an underscore', 'ABC_DEF'],
    ['longer than 20 (§8)', 'A'.repeat(LIMITS.referralCodeMaxLength + 1)],
  ])('a referral code %s → 400 Invalid referral code', async (_label, referralCode) => {
    const res = await register({ email: freshEmail(), password: 'Tr1cky-horse-battery', referralCode });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'Invalid referral code' });
  });

  it('an unknown (well-formed) referral code → 400 Invalid referral code and no user is created', async () => {
    const email = freshEmail();
    const res = await register({ email, password: 'Tr1cky-horse-battery', referralCode: 'NO-SUCH-CODE-1' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'Invalid referral code' });
    const rows = await t.database.db.kysely.selectFrom('users').select('id').where('email', '=', email).execute();
    expect(rows).toHaveLength(0);
  });
});

describe('§4.1 POST /api/register → 409', () => {
  it('the same email again → 409 User already exists', async () => {
    const email = freshEmail();
    expect((await register({ email, password: 'Tr1cky-horse-battery' })).statusCode).toBe(201);
    const res = await register({ email, password: 'another-password' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual({ error: expect.any(String) });
  });

  it('the same email in a different case (§2: case-insensitive) → 409; the email is stored lower-cased', async () => {
    const email = freshEmail();
    const first = await register({ email: email.toUpperCase(), password: 'Tr1cky-horse-battery' });
    expect(first.statusCode).toBe(201);
    expect(first.json().email).toBe(email);
    const res = await register({ email: email.replace(/^r/, 'R'), password: 'Tr1cky-horse-battery' });
    expect(res.statusCode).toBe(409);
    const rows = await t.database.db.kysely.selectFrom('users').select('id').where('email', '=', email).execute();
    expect(rows).toHaveLength(1);
  });
});

describe('§4.1 referral codes: both the new user and the referrer get credit', () => {
  it('credits both users, case-insensitively, visible through GET /api/user', async () => {
    const referrerEmail = freshEmail();
    const referrer = await register({ email: referrerEmail, password: 'Tr1cky-horse-battery' });
    expect((await profile(referrerEmail, 'Tr1cky-horse-battery')).credits).toBe(0);
    const code = await referralCodeOf(referrer.json().id);

    const newEmail = freshEmail();
    // "case-insensitive": send the code in lower case
    const res = await register({ email: newEmail, password: 'Tr1cky-horse-battery', referralCode: code.toLowerCase() });
    expect(res.statusCode).toBe(201);

    expect((await profile(newEmail, 'Tr1cky-horse-battery')).credits).toBe(LIMITS.referralCredit);
    expect((await profile(referrerEmail, 'Tr1cky-horse-battery')).credits).toBe(LIMITS.referralCredit);
    expect(LIMITS.referralCredit).toBeGreaterThan(0);

    // a second referral credits the referrer again
    const third = freshEmail();
    expect((await register({ email: third, password: 'Tr1cky-horse-battery', referralCode: code })).statusCode).toBe(201);
    expect((await profile(referrerEmail, 'Tr1cky-horse-battery')).credits).toBe(2 * LIMITS.referralCredit);
  });

  it('a failed sign-up with a valid referral code (409) credits nobody', async () => {
    const referrerEmail = freshEmail();
    const referrer = await register({ email: referrerEmail, password: 'Tr1cky-horse-battery' });
    const code = await referralCodeOf(referrer.json().id);
    const res = await register({ email: referrerEmail, password: 'Tr1cky-horse-battery', referralCode: code });
    expect(res.statusCode).toBe(409);
    expect((await profile(referrerEmail, 'Tr1cky-horse-battery')).credits).toBe(0);
  });
});
