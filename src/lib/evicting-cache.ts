/**
 * Short-lived in-process caches of who a credential belongs to: session cookies (token hash →
 * session user) and API keys (key hash → owner profile), so an authenticated request needs no
 * PostgreSQL round trip each time (the session endpoint's throughput goal, docs/benchmarks.md).
 *
 * The rules both keep:
 * - an entry lives at most `ttlMs` (default 5 s; 0 turns the cache off), and a session or an API
 *   key never past its own expiry;
 * - an eviction (sign-out, a revoked session or deleted key, a user whose plan or rights changed)
 *   applies at once in this process and, with REDIS_URL, in every replica (pub/sub); without Redis
 *   another replica may accept the old credential for at most `ttlMs`;
 * - at most `maxEntries` entries: the oldest goes first under a flood of new credentials;
 * - losing the cache is harmless (docs/architecture.md "Processes").
 * Looking entries up by a SHA-256 in a Map is not a secret comparison: the key is a hash of a
 * 256-bit random secret, and timing reveals nothing usable about it.
 */
import { createEvictionBus, localOnlyBus } from './eviction-bus.ts';

export type CacheOptions = { ttlMs?: number; maxEntries?: number; redisUrl?: string; redisTimeoutMs?: number; now?: () => number };

/**
 * The one mechanism: entries by hash, evicted by the value of one of their `fields` (a field
 * named `hash` is the entry's own key), here and through the channel in every replica.
 */
function createEvictingCache<V>(
  options: CacheOptions & {
    channel: string;
    fields: Record<string, (value: V, hash: string) => string>;
    /** an entry's own end (ms), besides the TTL */
    expiresAt?: (value: V) => number;
  },
) {
  const ttlMs = options.ttlMs ?? 5000;
  const maxEntries = options.maxEntries ?? 50_000;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { value: V; until: number }>();
  const drop = (field: string, wanted: string) => {
    const of = options.fields[field];
    if (!of) return;
    for (const [k, v] of entries) if (of(v.value, k) === wanted) entries.delete(k);
  };
  const apply = (message: string) => {
    const at = message.indexOf(':');
    if (at > 0) drop(message.slice(0, at), message.slice(at + 1));
  };
  const bus = options.redisUrl ? createEvictionBus(options.redisUrl, options.channel, apply, options.redisTimeoutMs) : localOnlyBus;
  return {
    get(hash: string): V | undefined {
      const e = entries.get(hash);
      if (!e) return undefined;
      const t = now();
      if (e.until <= t || (options.expiresAt && options.expiresAt(e.value) <= t)) {
        entries.delete(hash);
        return undefined;
      }
      return e.value;
    },
    set(hash: string, value: V): void {
      if (ttlMs <= 0) return;
      // Map keeps insertion order: dropping the oldest entry bounds memory
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!);
      entries.set(hash, { value, until: now() + ttlMs });
    },
    evict(field: string, value: string): void {
      drop(field, value);
      bus.publish(`${field}:${value}`);
    },
    close: () => bus.close(),
  };
}

/** What a session cache holds of a session: its user (`id`) and when the session ends. */
export type SessionEntry = { id: string; expiresAt: number };

export interface SessionCache<S extends SessionEntry = SessionEntry> {
  get(tokenHash: string): S | undefined;
  set(tokenHash: string, session: S): void;
  /** Evicts one session everywhere (sign-out). */
  evictToken(tokenHash: string): void;
  /** Evicts every session of a user everywhere (revocation, profile change). */
  evictUser(userId: string): void;
  close(): Promise<void>;
}

export function createSessionCache<S extends SessionEntry>(options: CacheOptions = {}): SessionCache<S> {
  const { get, set, evict, close } = createEvictingCache<S>({
    ...options,
    channel: 'platform:session-evictions',
    fields: { t: (_s, hash) => hash, u: (s) => s.id },
    expiresAt: (s) => s.expiresAt,
  });
  return { get, set, close, evictToken: (tokenHash) => evict('t', tokenHash), evictUser: (userId) => evict('u', userId) };
}

/**
 * What a key cache holds of a key: its id and owner (what evicts it), what it validated to, and
 * when the secret stops being accepted (ms; null or absent: never) — an expiring key, or a rolled
 * key's old secret at the end of its grace, leaves the cache then, whatever the TTL says.
 */
export type CachedKey<P> = { keyId: string; userId: string; profile: P; expiresAt?: number | null };

export interface KeyCache<P> {
  get(hashHex: string): CachedKey<P> | undefined;
  set(hashHex: string, entry: CachedKey<P>): void;
  /** A deleted key, everywhere. */
  evictKey(keyId: string): void;
  /** Every key of a user, everywhere (their profile changed). */
  evictUser(userId: string): void;
  close(): Promise<void>;
}

export function createKeyCache<P>(options: CacheOptions = {}): KeyCache<P> {
  const { get, set, evict, close } = createEvictingCache<CachedKey<P>>({
    ...options,
    channel: 'platform:key-evictions',
    fields: { k: (e) => e.keyId, u: (e) => e.userId },
    expiresAt: (e) => e.expiresAt ?? Number.POSITIVE_INFINITY,
  });
  return { get, set, close, evictKey: (keyId) => evict('k', keyId), evictUser: (userId) => evict('u', userId) };
}
