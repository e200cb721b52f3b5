/**
 * §4.1 register 409 "user exists" under concurrency, §2 User email case-insensitive: ten
 * simultaneous sign-ups with the same email in different cases create exactly one user (the
 * unique index on lower(email) decides, not a check-then-insert in code).
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform({ REGISTER_RATE_LIMIT: '1000' });
});
afterAll(() => t.close());

const variants = (local: string) => {
  const base = `${local}@example.com`;
  return Array.from({ length: 10 }, (_, i) =>
    [...base].map((ch, j) => ((i >> (j % 4)) & 1 ? ch.toUpperCase() : ch.toLowerCase())).join(''),
  );
};

describe('§4.1 ten concurrent registrations with one email', () => {
  it.each([1, 2, 3])('round %i: exactly one 201, nine 409, one row', async (round) => {
    const local = `race${round}${Date.now().toString(36)}`;
    const emails = variants(local);
    expect(new Set(emails).size).toBeGreaterThan(1); // really different spellings
    const results = await Promise.all(
      emails.map((email, i) => t.web.inject({ method: 'POST', url: '/api/register', payload: { email, password: `password-${i}` } })),
    );
    const codes = results.map((r) => r.statusCode).sort();
    expect(codes).toEqual([201, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
    for (const r of results.filter((x) => x.statusCode === 409)) expect(r.json()).toEqual({ error: expect.any(String) });

    const { rows } = await sql<{ n: number }>`select count(*)::int as n from users where lower(email) = ${`${local}@example.com`}`.execute(
      t.database.db.kysely,
    );
    expect(rows[0]!.n).toBe(1);

    // the one account works with the password of the request that won
    const winner = results.findIndex((r) => r.statusCode === 201);
    const login = await t.web.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: `${local}@example.com`, password: `password-${winner}` },
    });
    expect(login.statusCode).toBe(200);
    expect(login.json().user.id).toBe(results[winner]!.json().id);
  });
});
