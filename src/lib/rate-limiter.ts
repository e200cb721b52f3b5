/**
 * Fixed-window counters for per-IP limits (sign-ups, AI, demo chat). In-process by default;
 * shared across replicas through Redis when REDIS_URL is set. Losing the in-process counters on
 * restart is acceptable: they are a cache of recent traffic, not data.
 */
import { closeRedis, newRedis, redisOptions } from './redis.ts';

export type RateDecision = { allowed: boolean; count: number; limit: number; retryAfterMs: number };

export interface RateLimiter {
  /** Counts one hit for `key` in the current window of `windowMs` and says whether it is allowed. */
  consume(key: string, limit: number, windowMs: number): Promise<RateDecision>;
  /**
   * `consume`, decided at once, where the counters are this process's own (the in-memory limiter).
   * Absent where a decision needs a round trip (Redis). The AI routes ask this first: every proxied
   * model call passes a limit, and a promise per call showed in their profile (docs/benchmarks.md "AI proxy").
   */
  consumeNow?(key: string, limit: number, windowMs: number): RateDecision;
  /** Takes back one hit of `key` in its current window (never below zero); a no-op when none is counted. */
  release(key: string): Promise<void>;
  /** Forgets `key`'s current window (e.g. a successful sign-in clears its failure count). */
  reset(key: string): Promise<void>;
  close(): Promise<void>;
}

export function createMemoryRateLimiter(now: () => number = Date.now): RateLimiter {
  const windows = new Map<string, { count: number; resetAt: number }>();
  const sweep = setInterval(() => {
    const t = now();
    for (const [k, w] of windows) if (w.resetAt <= t) windows.delete(k);
  }, 60_000);
  sweep.unref();
  const consumeNow = (key: string, limit: number, windowMs: number): RateDecision => {
    const t = now();
    let w = windows.get(key);
    if (!w || w.resetAt <= t) {
      w = { count: 0, resetAt: t + windowMs };
      windows.set(key, w);
    }
    w.count += 1;
    return { allowed: w.count <= limit, count: w.count, limit, retryAfterMs: Math.max(0, w.resetAt - t) };
  };
  return {
    consumeNow,
    async consume(key, limit, windowMs) {
      return consumeNow(key, limit, windowMs);
    },
    async release(key) {
      const w = windows.get(key);
      if (w && w.count > 0) w.count -= 1;
    },
    async reset(key) {
      windows.delete(key);
    },
    async close() {
      clearInterval(sweep);
    },
  };
}

// INCR and set the expiry on the first hit of a window, atomically; returns count and ms left.
const CONSUME_LUA = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {n, ttl}`;

// DECR only an existing counter that is above zero (a release must not create a key without expiry)
const RELEASE_LUA = `
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n > 0 then redis.call('DECR', KEYS[1]) end
return n`;

/**
 * Counters shared by every replica through Redis. Every command is bounded by `timeoutMs`; while
 * Redis fails, each call falls back to this process's own counters (limits keep applying per
 * process) instead of failing the request, and `onError` hears about it at most once a minute.
 */
export function createRedisRateLimiter(
  url: string,
  prefixOrOptions: string | { prefix?: string; timeoutMs?: number; onError?: (err: Error) => void } = {},
): RateLimiter {
  const options = typeof prefixOrOptions === 'string' ? { prefix: prefixOrOptions } : prefixOrOptions;
  const prefix = options.prefix ?? 'rl:';
  const redis = newRedis(url, redisOptions(options.timeoutMs));
  redis.on('error', () => {}); // surfaced per call; a Redis blip must not crash the process
  const local = createMemoryRateLimiter();
  let lastReport = 0;
  const fallback = <T>(err: unknown, run: () => Promise<T>): Promise<T> => {
    if (Date.now() - lastReport > 60_000) {
      lastReport = Date.now();
      options.onError?.(err as Error);
    }
    return run();
  };
  return {
    async consume(key, limit, windowMs) {
      try {
        const [count, ttl] = (await redis.eval(CONSUME_LUA, 1, prefix + key, String(windowMs))) as [number, number];
        return { allowed: count <= limit, count, limit, retryAfterMs: ttl };
      } catch (err) {
        return fallback(err, () => local.consume(key, limit, windowMs));
      }
    },
    async release(key) {
      try {
        await redis.eval(RELEASE_LUA, 1, prefix + key);
      } catch (err) {
        await fallback(err, () => local.release(key));
      }
    },
    async reset(key) {
      try {
        await redis.del(prefix + key);
      } catch (err) {
        await fallback(err, () => local.reset(key));
      }
    },
    async close() {
      await local.close();
      await closeRedis(redis, options.timeoutMs);
    },
  };
}

export function createRateLimiter(
  redisUrl: string | undefined,
  options: { timeoutMs?: number; onError?: (err: Error) => void } = {},
): RateLimiter {
  return redisUrl ? createRedisRateLimiter(redisUrl, options) : createMemoryRateLimiter();
}
