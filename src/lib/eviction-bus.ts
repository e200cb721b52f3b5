/**
 * Cache evictions across replicas: a Redis pub/sub channel on which each process publishes what
 * it evicted and applies what others did (the session cache, the API key cache). Best effort by
 * design: commands are bounded by REDIS_TIMEOUT_MS so an eviction never waits for an unreachable
 * Redis, and a missed message only means another replica's entry lives out its short TTL.
 *
 * The same messages end long-lived answers (live-log streams, proxied WebSockets and streaming
 * answers) opened with a session or an API key that is no longer valid: `createStreamRevoker`.
 */
import { sha256Base64url } from './crypto.ts';
import { closeRedis, newRedis, redisOptions } from './redis.ts';

export type EvictionBus = { publish(message: string): void; close(): Promise<void> };

/** No Redis: nothing to tell (one process, or replicas that accept the TTL). */
export const localOnlyBus: EvictionBus = { publish() {}, close: async () => {} };

/**
 * The channels of the session cache and the API key cache (src/lib/evicting-cache.ts) and their
 * messages: `t:<session token hash>` (sign-out),
 * `k:<API key id>` (key deleted), `u:<user id>` (every session and key of a user evicted: revoked,
 * or the user changed).
 */
export const EVICTION_CHANNELS = ['platform:session-evictions', 'platform:key-evictions'] as const;

/** Listens on `channels`; a subscriber holds a blocking connection of its own. */
function subscribe(url: string, channels: readonly string[], onMessage: (m: string) => void, timeoutMs?: number) {
  // no command timeout, and an offline queue for SUBSCRIBE (sent again when Redis comes back)
  const sub = newRedis(url, { ...redisOptions(timeoutMs), commandTimeout: undefined, enableOfflineQueue: true });
  sub.on('error', () => {});
  void sub.subscribe(...channels).catch(() => {});
  sub.on('message', (_channel: string, message: string) => onMessage(message));
  return { close: () => closeRedis(sub, timeoutMs) };
}

export function createEvictionBus(url: string, channel: string, onMessage: (m: string) => void, timeoutMs?: number): EvictionBus {
  const pub = newRedis(url, redisOptions(timeoutMs));
  pub.on('error', () => {});
  const sub = subscribe(url, [channel], onMessage, timeoutMs);
  return {
    publish(message) {
      void pub.publish(channel, message).catch(() => {});
    },
    async close() {
      await Promise.all([closeRedis(pub, timeoutMs), sub.close()]);
    },
  };
}

/** What a long-lived answer was opened with: a session cookie's token, or an `sk_` API key. */
export type StreamCredential = { session: string } | { apiKey: string };

/** One long-lived answer's credential under watch (`StreamRevoker.watch`). */
export type RevocationWatch = { onRevoked(end: () => void): void; release(): void };

export type StreamRevokerDeps = {
  /** Whether `credential` still authenticates `userId` (asked after an eviction that may concern it). */
  stillValid(userId: string, credential: StreamCredential): Promise<boolean>;
  /** REDIS_URL: evictions published by every replica reach this process's streams too */
  redisUrl?: string | undefined;
  redisTimeoutMs?: number | undefined;
};

/**
 * Ends long-lived answers whose credential was revoked (docs/security.md N12: a signed-out session's log
 * stream kept receiving lines, a deleted key's WebSocket kept chatting). A sign-out ends the
 * streams of that session at once; a deleted key, or a user whose sessions and keys were evicted,
 * makes the streams that may be concerned check their credential again (a key's id is not known
 * from the key, and a user eviction may be a mere profile change), ending those no longer valid,
 * or whose check fails. Evictions come from this process (`sessionEnded`, `keyDeleted`,
 * `userEvicted`) and, with Redis, from every replica's caches (EVICTION_CHANNELS).
 */
export function createStreamRevoker(deps: StreamRevokerDeps) {
  type Watched = {
    userId: string;
    credential: StreamCredential;
    sessionHash: string | undefined;
    revoked: boolean;
    end: (() => void) | undefined;
  };
  const watched = new Set<Watched>();

  const stop = (w: Watched) => {
    if (!watched.delete(w)) return;
    w.revoked = true;
    w.end?.();
  };
  const recheck = (w: Watched) =>
    void deps.stillValid(w.userId, w.credential).then(
      (ok) => {
        if (!ok) stop(w);
      },
      () => stop(w),
    );
  const each = (match: (w: Watched) => boolean, act: (w: Watched) => void) => {
    for (const w of [...watched]) if (match(w)) act(w);
  };

  const revoker = {
    /**
     * Watches `credential` from the moment it was authenticated (before the answer starts, so a
     * revocation in between is not missed) until `release`. `onRevoked(end)` names what ends the
     * answer; it runs at once when the credential was revoked meanwhile.
     */
    watch(userId: string, credential: StreamCredential): RevocationWatch {
      const sessionHash = 'session' in credential ? sha256Base64url(credential.session) : undefined;
      const w: Watched = { userId, credential, sessionHash, revoked: false, end: undefined };
      watched.add(w);
      return {
        onRevoked(end) {
          w.end = end;
          if (w.revoked) end();
        },
        release() {
          watched.delete(w);
        },
      };
    },
    /** A session was signed out (its cookie token's SHA-256, base64url, as the session cache keys it). */
    sessionEnded(tokenHash: string) {
      each((w) => w.sessionHash === tokenHash, stop);
    },
    /** An API key was deleted. */
    keyDeleted() {
      each((w) => 'apiKey' in w.credential, recheck);
    },
    /** Every session and key of a user was evicted (revoked, or the user changed). */
    userEvicted(userId: string) {
      each((w) => w.userId === userId, recheck);
    },
    /** Answers watched in this process (tests: nothing leaks). */
    get size() {
      return watched.size;
    },
    close: async () => {
      await sub?.close();
    },
  };

  /** A cache's eviction message (EVICTION_CHANNELS), from any replica. */
  const apply = (m: string) => {
    if (m.startsWith('t:')) revoker.sessionEnded(m.slice(2));
    else if (m.startsWith('k:')) revoker.keyDeleted();
    else if (m.startsWith('u:')) revoker.userEvicted(m.slice(2));
  };
  const sub = deps.redisUrl ? subscribe(deps.redisUrl, EVICTION_CHANNELS, apply, deps.redisTimeoutMs) : undefined;
  return revoker;
}

export type StreamRevoker = ReturnType<typeof createStreamRevoker>;
