/** The session cache may be lost but never be wrong for longer than its TTL (src/lib/evicting-cache.ts). */
import { describe, expect, it } from 'vitest';
import { createSessionCache } from '../../src/lib/evicting-cache.ts';

const user = (id: string, expiresAt: number) => ({ id, name: id, email: `${id}@example.com`, isAdmin: false, expiresAt });

describe('session cache', () => {
  it('serves an entry until its TTL, then forgets it', () => {
    let t = 1000;
    const c = createSessionCache({ ttlMs: 5000, now: () => t });
    c.set('k', user('u1', 1e12));
    expect(c.get('k')?.id).toBe('u1');
    t += 4999;
    expect(c.get('k')?.id).toBe('u1');
    t += 1;
    expect(c.get('k')).toBeUndefined();
  });

  it('never outlives the session itself', () => {
    let t = 1000;
    const c = createSessionCache({ ttlMs: 5000, now: () => t });
    c.set('k', user('u1', 2000));
    t = 2000;
    expect(c.get('k')).toBeUndefined();
  });

  it('evicts one token (sign-out) and every token of a user (revocation)', () => {
    const c = createSessionCache();
    c.set('a1', user('alice', 1e15));
    c.set('a2', user('alice', 1e15));
    c.set('b1', user('bob', 1e15));
    c.evictToken('a1');
    expect(c.get('a1')).toBeUndefined();
    expect(c.get('a2')?.id).toBe('alice');
    c.evictUser('alice');
    expect(c.get('a2')).toBeUndefined();
    expect(c.get('b1')?.id).toBe('bob');
  });

  it('is bounded: the oldest entry goes first', () => {
    const c = createSessionCache({ maxEntries: 2 });
    c.set('1', user('u1', 1e15));
    c.set('2', user('u2', 1e15));
    c.set('3', user('u3', 1e15));
    expect(c.get('1')).toBeUndefined();
    expect(c.get('3')?.id).toBe('u3');
  });

  it('a TTL of 0 disables caching', () => {
    const c = createSessionCache({ ttlMs: 0 });
    c.set('k', user('u1', 1e15));
    expect(c.get('k')).toBeUndefined();
  });

  it.skipIf(!process.env.REDIS_URL)('evictions reach other replicas through Redis', async () => {
    const a = createSessionCache({ redisUrl: process.env.REDIS_URL! });
    const b = createSessionCache({ redisUrl: process.env.REDIS_URL! });
    try {
      await new Promise((r) => setTimeout(r, 200)); // subscriptions established
      b.set('tok', user('carol', 1e15));
      b.set('tok2', user('dave', 1e15));
      a.evictToken('tok');
      a.evictUser('dave');
      const until = Date.now() + 3000;
      while ((b.get('tok') || b.get('tok2')) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      expect(b.get('tok')).toBeUndefined();
      expect(b.get('tok2')).toBeUndefined();
    } finally {
      await a.close();
      await b.close();
    }
  });
});
