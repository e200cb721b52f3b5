/**
 * A short-lived in-process cache of verified API keys (sha256 of the key → the owner's profile),
 * so a request authenticated by an `sk_` key (POST /api/validate-key, the agent gateway proxy)
 * needs no PostgreSQL round trip each time. The same guarantees as the session cache:
 * - an entry lives at most `ttlMs` (API_KEY_CACHE_TTL_MS, default 5 s; 0 turns the cache off);
 * - deleting a key evicts it at once in this process and, with REDIS_URL, in every replica
 *   (pub/sub); without Redis another replica may accept a deleted key for at most `ttlMs`;
 * - a user change that evicts their sessions (plan, admin rights) evicts their keys the same way.
 * Looking entries up by the key's SHA-256 in a Map is not a secret comparison: the map key is a
 * hash of a 256-bit random secret, and timing reveals nothing usable about the key itself.
 */
import { createEvictionBus, localOnlyBus } from '../../lib/eviction-bus.ts';

export type CachedKey<P> = { keyId: string; userId: string; profile: P };

export interface KeyCache<P> {
  get(hashHex: string): CachedKey<P> | undefined;
  set(hashHex: string, entry: CachedKey<P>): void;
  /** A deleted key, everywhere. */
  evictKey(keyId: string): void;
  /** Every key of a user, everywhere (their profile changed). */
  evictUser(userId: string): void;
  close(): Promise<void>;
}

const CHANNEL = 'platform:key-evictions';

export function createKeyCache<P>(
  options: { ttlMs?: number; maxEntries?: number; redisUrl?: string; redisTimeoutMs?: number; now?: () => number } = {},
): KeyCache<P> {
  const ttlMs = options.ttlMs ?? 5000;
  const maxEntries = options.maxEntries ?? 50_000;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { entry: CachedKey<P>; until: number }>();
  const drop = (field: 'keyId' | 'userId', value: string) => {
    for (const [k, v] of entries) if (v.entry[field] === value) entries.delete(k);
  };
  const apply = (m: string) => {
    if (m.startsWith('k:')) drop('keyId', m.slice(2));
    else if (m.startsWith('u:')) drop('userId', m.slice(2));
  };
  const bus = options.redisUrl ? createEvictionBus(options.redisUrl, CHANNEL, apply, options.redisTimeoutMs) : localOnlyBus;
  return {
    get(hashHex) {
      const e = entries.get(hashHex);
      if (!e) return undefined;
      if (e.until <= now()) {
        entries.delete(hashHex);
        return undefined;
      }
      return e.entry;
    },
    set(hashHex, entry) {
      if (ttlMs <= 0) return;
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!);
      entries.set(hashHex, { entry, until: now() + ttlMs });
    },
    evictKey(keyId) {
      drop('keyId', keyId);
      bus.publish(`k:${keyId}`);
    },
    evictUser(userId) {
      drop('userId', userId);
      bus.publish(`u:${userId}`);
    },
    close: () => bus.close(),
  };
}
