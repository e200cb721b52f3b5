/** The API key cache (src/lib/evicting-cache.ts): TTL, evictions by key and by user, bound, TTL 0, evictions across replicas through Redis. */
import { describe, expect, it } from 'vitest';
import { createKeyCache } from '../../src/lib/evicting-cache.ts';

const entry = (keyId: string, userId: string) => ({ keyId, userId, profile: { plan: 'solo' } });

describe('API key cache', () => {
  it('serves an entry until its TTL, then forgets it', () => {
    let now = 1000;
    const c = createKeyCache<{ plan: string }>({ ttlMs: 5000, now: () => now });
    c.set('h1', entry('k1', 'u1'));
    expect(c.get('h1')?.userId).toBe('u1');
    now += 4999;
    expect(c.get('h1')).toBeDefined();
    now += 1;
    expect(c.get('h1')).toBeUndefined();
  });

  it('evicts a deleted key, and every key of a changed user, at once', () => {
    const c = createKeyCache<{ plan: string }>();
    c.set('h1', entry('k1', 'u1'));
    c.set('h2', entry('k2', 'u1'));
    c.set('h3', entry('k3', 'u2'));
    c.evictKey('k1');
    expect(c.get('h1')).toBeUndefined();
    expect(c.get('h2')).toBeDefined();
    c.evictUser('u1');
    expect(c.get('h2')).toBeUndefined();
    expect(c.get('h3')).toBeDefined();
  });

  it('is bounded (oldest first) and off with a TTL of 0', () => {
    const c = createKeyCache<{ plan: string }>({ maxEntries: 2 });
    c.set('1', entry('k1', 'u'));
    c.set('2', entry('k2', 'u'));
    c.set('3', entry('k3', 'u'));
    expect(c.get('1')).toBeUndefined();
    expect(c.get('3')).toBeDefined();
    const off = createKeyCache<{ plan: string }>({ ttlMs: 0 });
    off.set('1', entry('k1', 'u'));
    expect(off.get('1')).toBeUndefined();
  });

  it.skipIf(!process.env.REDIS_URL)('a key deleted in one replica stops validating in another at once (Redis)', async () => {
    const a = createKeyCache<{ plan: string }>({ redisUrl: process.env.REDIS_URL! });
    const b = createKeyCache<{ plan: string }>({ redisUrl: process.env.REDIS_URL!, ttlMs: 60_000 });
    try {
      await new Promise((r) => setTimeout(r, 200)); // subscriptions established
      b.set('h1', entry('k1', 'u1'));
      b.set('h2', entry('k2', 'u2'));
      a.evictKey('k1');
      a.evictUser('u2');
      const until = Date.now() + 3000;
      while ((b.get('h1') || b.get('h2')) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      expect(b.get('h1')).toBeUndefined();
      expect(b.get('h2')).toBeUndefined();
    } finally {
      await a.close();
      await b.close();
    }
  });
});
