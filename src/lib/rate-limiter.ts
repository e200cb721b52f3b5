/**
 * Fixed-window counters for per-IP limits (sign-ups, AI, demo chat). In-process by default;
 * shared across replicas through Redis when REDIS_URL is set. Losing the in-process counters on
 * restart is acceptable: they are a cache of recent traffic, not data.
 */
import { Redis } from 'ioredis';

export type RateDecision = { allowed: boolean; count: number; limit: number; retryAfterMs: number };

export interface RateLimiter {
  /** Counts one hit for `key` in the current window of `windowMs` and says whether it is allowed. */
  consume(key: string, limit: number, windowMs: number): Promise<RateDecision>;
  close(): Promise<void>;
}

export function createMemoryRateLimiter(now: () => number = Date.now): RateLimiter {
  const windows = new Map<string, { count: number; resetAt: number }>();
  const sweep = setInterval(() => {
    const t = now();
    for (const [k, w] of windows) if (w.resetAt <= t) windows.delete(k);
  }, 60_000);
  sweep.unref();
  return {
    async consume(key, limit, windowMs) {
      const t = now();
      let w = windows.get(key);
      if (!w || w.resetAt <= t) {
        w = { count: 0, resetAt: t + windowMs };
        windows.set(key, w);
      }
      w.count += 1;
      return { allowed: w.count <= limit, count: w.count, limit, retryAfterMs: Math.max(0, w.resetAt - t) };
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

export function createRedisRateLimiter(url: string, prefix = 'rl:'): RateLimiter {
  const redis = new Redis(url, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false });
  redis.on('error', () => {}); // surfaced per call; a Redis blip must not crash the process
  return {
    async consume(key, limit, windowMs) {
      const [count, ttl] = (await redis.eval(CONSUME_LUA, 1, prefix + key, String(windowMs))) as [number, number];
      return { allowed: count <= limit, count, limit, retryAfterMs: ttl };
    },
    async close() {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

export function createRateLimiter(redisUrl: string | undefined): RateLimiter {
  return redisUrl ? createRedisRateLimiter(redisUrl) : createMemoryRateLimiter();
}
