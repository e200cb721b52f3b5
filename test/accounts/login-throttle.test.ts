/**
 * Failed sign-in limits and the common-password list (docs/security.md "Password sign-in";
 * §4.1 login, §7 429). Clients are told apart by their socket address (`remoteAddress`).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createMemoryRateLimiter, createRedisRateLimiter } from '../../src/lib/rate-limiter.ts';
import { signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const login = (t: TestPlatform, email: string, password: string, ip: string) =>
  t.web.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password }, remoteAddress: ip });

describe('failed sign-ins per account and IP → 429 with Retry-After; the owner elsewhere is not locked out', () => {
  let t: TestPlatform;
  let clock = Date.now();
  beforeAll(async () => {
    t = await startTestPlatform(
      { LOGIN_FAILURE_LIMIT: '5', REGISTER_RATE_LIMIT: '1000' },
      { rateLimiter: createMemoryRateLimiter(() => clock) },
    );
  });
  afterAll(() => t?.close());

  it('5 wrong passwords are 401, the 6th attempt (even with the right password) is 429 with Retry-After', async () => {
    const u = await signUp(t.web);
    for (let i = 0; i < 5; i++) expect((await login(t, u.email, `wrong-${i}-guess`, '198.51.100.1')).statusCode).toBe(401);
    const locked = await login(t, u.email, u.password, '198.51.100.1');
    expect(locked.statusCode).toBe(429);
    expect(locked.json()).toEqual({ error: 'Too many failed sign-in attempts; try again later', retryAfter: expect.any(Number) });
    const retryAfter = Number(locked.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(15 * 60);
    expect(locked.headers['set-cookie']).toBeUndefined();
    // the owner from another address signs in normally
    expect((await login(t, u.email, u.password, '203.0.113.9')).statusCode).toBe(200);
    // and the lockout ends with the window
    clock += 15 * 60 * 1000 + 1;
    expect((await login(t, u.email, u.password, '198.51.100.1')).statusCode).toBe(200);
  });

  it('a successful sign-in clears the account+IP count (typos do not add up across sessions)', async () => {
    const u = await signUp(t.web);
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 4; i++) expect((await login(t, u.email, 'typo-typo-typo', '198.51.100.2')).statusCode).toBe(401);
      expect((await login(t, u.email, u.password, '198.51.100.2')).statusCode).toBe(200);
    }
  });

  it('a burst of 30 parallel guesses gets at most LOGIN_FAILURE_LIMIT password checks', async () => {
    const u = await signUp(t.web);
    const codes = await Promise.all(
      Array.from({ length: 30 }, (_, i) => login(t, u.email, `parallel-${i}`, '198.51.100.3').then((r) => r.statusCode)),
    );
    expect(codes.filter((c) => c === 401).length).toBe(5);
    expect(codes.filter((c) => c === 429).length).toBe(25);
  });
});

describe('failed sign-ins per IP across accounts (password spraying)', () => {
  it('LOGIN_IP_FAILURE_LIMIT failures from one IP on different accounts, then 429 for that IP only', async () => {
    await withTestPlatform({ LOGIN_IP_FAILURE_LIMIT: '3', REGISTER_RATE_LIMIT: '1000' }, async (t) => {
      const users = [await signUp(t.web), await signUp(t.web), await signUp(t.web), await signUp(t.web)];
      for (const u of users.slice(0, 3)) expect((await login(t, u.email, 'Spray-guess-1', '192.0.2.50')).statusCode).toBe(401);
      expect((await login(t, users[3]!.email, 'Spray-guess-1', '192.0.2.50')).statusCode).toBe(429);
      expect((await login(t, users[3]!.email, users[3]!.password, '192.0.2.51')).statusCode).toBe(200);
    });
  });
});

describe('failed sign-ins per account from many IPs (distributed guessing)', () => {
  it('the account-wide limit stops new IPs, but an IP holding a live session of the account still signs in', async () => {
    await withTestPlatform({ LOGIN_ACCOUNT_FAILURE_LIMIT: '3', REGISTER_RATE_LIMIT: '1000' }, async (t) => {
      const u = await signUp(t.web);
      // the owner signed in from 203.0.113.77 before the attack
      expect((await login(t, u.email, u.password, '203.0.113.77')).statusCode).toBe(200);
      for (let i = 1; i <= 3; i++) expect((await login(t, u.email, 'Botnet-guess-x', `10.9.0.${i}`)).statusCode).toBe(401);
      const blocked = await login(t, u.email, 'Botnet-guess-x', '10.9.0.4');
      expect(blocked.statusCode).toBe(429);
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
      // a new IP is refused even with the right password until the window ends...
      expect((await login(t, u.email, u.password, '10.9.0.5')).statusCode).toBe(429);
      // ...the owner's known IP is not
      expect((await login(t, u.email, u.password, '203.0.113.77')).statusCode).toBe(200);
    });
  });
});

describe.skipIf(!process.env.REDIS_URL)('failed sign-in limits shared through Redis (REDIS_URL)', () => {
  it('two instances share the account+IP count; a success on one clears it for both', async () => {
    const prefix = `test-login-${randomBytes(4).toString('hex')}:`;
    const env = { LOGIN_FAILURE_LIMIT: '4', REGISTER_RATE_LIMIT: '1000' };
    const a = await startTestPlatform(env, { rateLimiter: createRedisRateLimiter(process.env.REDIS_URL!, prefix) });
    const b = await startTestPlatform(env, { rateLimiter: createRedisRateLimiter(process.env.REDIS_URL!, prefix) });
    try {
      // one user, present in a's database; b has a user with the same email and password
      const u = await signUp(a.web);
      await b.web.inject({ method: 'POST', url: '/api/register', payload: { email: u.email, password: u.password } });
      for (let i = 0; i < 3; i++) expect((await login(i % 2 ? a : b, u.email, 'nope-nope-nope', '198.51.100.40')).statusCode).toBe(401);
      expect((await login(b, u.email, u.password, '198.51.100.40')).statusCode).toBe(200);
      for (let i = 0; i < 4; i++) expect((await login(i % 2 ? a : b, u.email, 'nope-nope-nope', '198.51.100.40')).statusCode).toBe(401);
      expect((await login(a, u.email, u.password, '198.51.100.40')).statusCode).toBe(429);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('common passwords are refused at registration (list from @zxcvbn-ts/language-common)', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform({ REGISTER_RATE_LIMIT: '1000' });
  });
  afterAll(() => t?.close());

  it.each(['12345678', 'password123', 'Password1', 'QWERTY123', 'iloveyou', 'sunshine'])('%s → 400, no user created', async (password) => {
    const email = `common-${randomBytes(4).toString('hex')}@example.com`;
    const res = await t.web.inject({ method: 'POST', url: '/api/register', payload: { email, password } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'Password is too common; choose a less guessable one' });
    const row = await t.database.db.kysely.selectFrom('users').select('id').where('email', '=', email).executeTakeFirst();
    expect(row).toBeUndefined();
  });

  it('an uncommon password of the minimum length is accepted', async () => {
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/register',
      payload: { email: `ok-${randomBytes(4).toString('hex')}@example.com`, password: 'q7#Lm2!z' },
    });
    expect(res.statusCode).toBe(201);
  });
});

describe('a database outage is not a wrong password (the fault bench, docs/benchmarks.md "Load and faults")', () => {
  it('sign-ins that failed because the database was down do not count: the right password works once it is back', async () => {
    const t = await startTestPlatform({ LOGIN_FAILURE_LIMIT: '5', REGISTER_RATE_LIMIT: '1000' });
    const admin = new pg.Client({ connectionString: inject('dbAdminUrl') });
    await admin.connect();
    const name = new URL(t.database.url).pathname.slice(1);
    try {
      const u = await signUp(t.web);
      // the platform's database stops taking connections and its open ones are ended (a restart, as the bench does)
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
      for (let i = 0; i < 8; i++) {
        const res = await login(t, u.email, u.password, '198.51.100.77');
        expect(res.statusCode).toBeGreaterThanOrEqual(500);
        expect(typeof res.json().error).toBe('string');
      }
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
      expect((await login(t, u.email, u.password, '198.51.100.77')).statusCode).toBe(200);
    } finally {
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`).catch(() => {});
      await admin.end();
      await t.close();
    }
  });
});
