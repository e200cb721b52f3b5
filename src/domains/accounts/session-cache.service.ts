/**
 * A short-lived in-process cache of cookie-token → session user, so an authenticated request
 * does not need a PostgreSQL round trip each time (the session endpoint's throughput goal).
 *
 * Correctness rules:
 * - Entries live at most `ttlMs` (default 5 s) and never past the session's own expiry.
 * - Sign-out, revoking a user's sessions, or changing the user evicts at once in this process,
 *   and, when REDIS_URL is set, in every replica through a Redis pub/sub channel. Without Redis
 *   a replica that did not handle the sign-out may accept the old cookie for at most `ttlMs`.
 * - Losing the cache is harmless (docs/architecture.md "Processes": a process keeps in memory only caches it may lose).
 */
import { createEvictionBus, localOnlyBus } from '../../lib/eviction-bus.ts';
import type { ExternalProvider } from './oauth-state.rules.ts';

/** `notice`: the provider whose first proof cleared a pre-registered password (a one-time dashboard notice), or null. */
export type CachedSession = {
  id: string;
  name: string;
  email: string;
  isAdmin: boolean;
  notice?: ExternalProvider | null;
  expiresAt: number;
};

export interface SessionCache {
  get(tokenHash: string): CachedSession | undefined;
  set(tokenHash: string, session: CachedSession): void;
  /** Evicts one session everywhere (sign-out). */
  evictToken(tokenHash: string): void;
  /** Evicts every session of a user everywhere (revocation, profile change). */
  evictUser(userId: string): void;
  close(): Promise<void>;
}

const CHANNEL = 'platform:session-evictions';

export function createSessionCache(
  options: { ttlMs?: number; maxEntries?: number; redisUrl?: string; redisTimeoutMs?: number; now?: () => number } = {},
): SessionCache {
  const ttlMs = options.ttlMs ?? 5000;
  const maxEntries = options.maxEntries ?? 50_000;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { session: CachedSession; until: number }>();

  const dropToken = (tokenHash: string) => entries.delete(tokenHash);
  const dropUser = (userId: string) => {
    for (const [k, v] of entries) if (v.session.id === userId) entries.delete(k);
  };
  const apply = (message: string) => {
    if (message.startsWith('t:')) dropToken(message.slice(2));
    else if (message.startsWith('u:')) dropUser(message.slice(2));
  };

  const broadcast = options.redisUrl ? createEvictionBus(options.redisUrl, CHANNEL, apply, options.redisTimeoutMs) : localOnlyBus;

  return {
    get(tokenHash) {
      const e = entries.get(tokenHash);
      if (!e) return undefined;
      const t = now();
      if (e.until <= t || e.session.expiresAt <= t) {
        entries.delete(tokenHash);
        return undefined;
      }
      return e.session;
    },
    set(tokenHash, session) {
      if (ttlMs <= 0) return;
      // Map keeps insertion order: dropping the oldest entry bounds memory under a flood of tokens
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!);
      entries.set(tokenHash, { session, until: now() + ttlMs });
    },
    evictToken(tokenHash) {
      dropToken(tokenHash);
      broadcast.publish(`t:${tokenHash}`);
    },
    evictUser(userId) {
      dropUser(userId);
      broadcast.publish(`u:${userId}`);
    },
    close: () => broadcast.close(),
  };
}
