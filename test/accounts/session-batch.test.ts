/**
 * Session cache misses share one query per event-loop turn (src/lib/batch-loader.ts): many
 * concurrent requests with different cookies must each get their own user, never another's; a
 * signed-out or unknown cookie in the same batch gets 401; nothing is remembered between batches.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBatchLoader } from '../../src/lib/batch-loader.ts';
import { createSessionCache } from '../../src/lib/evicting-cache.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

describe('batched session lookups (cache off: every request misses)', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform({ REGISTER_RATE_LIMIT: '1000' }, { sessionCache: createSessionCache({ ttlMs: 0 }) });
  });
  afterAll(() => t.close());

  it("60 concurrent requests with 20 users' cookies each see their own user; signed-out and unknown cookies get 401", async () => {
    const users = await Promise.all(Array.from({ length: 20 }, () => signUp(t.web)));
    const gone = await signUp(t.web);
    const out = await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: gone.cookie } });
    expect(out.statusCode).toBe(200);
    const calls = Array.from({ length: 60 }, (_, i) => users[i % users.length]!);
    const [answers, signedOut, unknown] = await Promise.all([
      Promise.all(calls.map((u) => t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie: u.cookie } }))),
      t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie: gone.cookie } }),
      t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie: 'service-session=not-a-session' } }),
    ]);
    answers.forEach((res, i) => {
      expect(res.statusCode).toBe(200);
      expect(res.json().email).toBe(calls[i]!.email);
    });
    expect(signedOut.statusCode).toBe(401);
    expect(unknown.statusCode).toBe(401);
  });

  it('a session deleted between two requests stops at the next one (nothing kept between batches)', async () => {
    const u = await signUp(t.web);
    expect((await t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie: u.cookie } })).statusCode).toBe(200);
    await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie } });
    expect((await t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie: u.cookie } })).statusCode).toBe(401);
  });
});

describe('createBatchLoader', () => {
  it('asks once per turn for distinct keys, answers duplicates alike, splits at maxBatch, and fails every waiter of a failed batch', async () => {
    const calls: string[][] = [];
    let fail = false;
    const load = createBatchLoader<string, string>({
      load: async (keys) => {
        calls.push(keys);
        if (fail) throw new Error('down');
        return new Map(keys.filter((k) => k !== 'missing').map((k) => [k, k.toUpperCase()]));
      },
      id: (k) => k,
      maxBatch: 3,
    });
    expect(await Promise.all(['a', 'b', 'a', 'missing', 'c'].map(load))).toEqual(['A', 'B', 'A', undefined, 'C']);
    expect(calls).toEqual([['a', 'b', 'missing'], ['c']]);
    expect(await load('d')).toBe('D');
    expect(calls.length).toBe(3);
    fail = true;
    const results = await Promise.allSettled([load('x'), load('y')]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  });

  it('while maxInFlight batches are under way, new keys wait and go together in the next one', async () => {
    const calls: number[][] = [];
    const gates: (() => void)[] = [];
    const load = createBatchLoader<number, number>({
      load: (keys) => {
        calls.push(keys);
        return new Promise((resolve) => gates.push(() => resolve(new Map(keys.map((k) => [String(k), k * 2])))));
      },
      id: String,
      maxInFlight: 1,
    });
    const first = load(1);
    await new Promise((r) => setImmediate(r));
    const later = [2, 3, 4].map((k) => load(k));
    await new Promise((r) => setImmediate(r));
    expect(calls).toEqual([[1]]); // 2, 3, 4 wait for the batch under way
    gates.shift()!();
    expect(await first).toBe(2);
    await new Promise((r) => setImmediate(r));
    expect(calls).toEqual([[1], [2, 3, 4]]);
    gates.shift()!();
    expect(await Promise.all(later)).toEqual([4, 6, 8]);
  });
});
