/**
 * One set of ioredis options for every Redis client of the platform, so an unreachable or silent
 * Redis costs a request at most `timeoutMs`, never the 7-15 s of ioredis's defaults (reconnect
 * retries and an offline queue that holds commands until Redis comes back).
 */
import { createRequire } from 'node:module';
import type { Redis, RedisOptions } from 'ioredis';

const requireCjs = createRequire(import.meta.url);
let RedisClass: typeof Redis | undefined;

/**
 * A new ioredis client. The package (about 20 MB resident) is loaded by the first client, so a
 * platform without REDIS_URL never loads it (docs/benchmarks.md "memory").
 */
export function newRedis(url: string, options: RedisOptions): Redis {
  RedisClass ??= (requireCjs('ioredis') as { Redis: typeof Redis }).Redis;
  return new RedisClass(url, options);
}

/** Default bound of one Redis command (REDIS_TIMEOUT_MS). */
export const DEFAULT_REDIS_TIMEOUT_MS = 500;

export function redisOptions(timeoutMs: number = DEFAULT_REDIS_TIMEOUT_MS): RedisOptions {
  return {
    commandTimeout: timeoutMs,
    connectTimeout: Math.max(timeoutMs, 1_000),
    maxRetriesPerRequest: 0,
    // while disconnected, commands fail at once instead of waiting in a queue
    enableOfflineQueue: false,
    // keep reconnecting in the background (capped back-off): Redis coming back heals the platform
    retryStrategy: (times) => Math.min(times * 200, 2_000),
  };
}

/**
 * Start-up check: connects and PINGs within `timeoutMs`. Returns undefined when Redis answers,
 * otherwise the reason (the caller logs it and starts degraded).
 */
export async function checkRedis(url: string, timeoutMs: number): Promise<string | undefined> {
  const redis = newRedis(url, { ...redisOptions(timeoutMs), lazyConnect: true, retryStrategy: () => null });
  redis.on('error', () => {});
  const timer = new Promise<string>((resolve) => setTimeout(() => resolve(`no answer within ${timeoutMs} ms`), timeoutMs).unref());
  try {
    return await Promise.race([
      redis
        .connect()
        .then(() => redis.ping())
        .then(() => undefined)
        .catch((err: Error) => err.message || String(err)),
      timer,
    ]);
  } finally {
    redis.disconnect();
  }
}

/** QUIT politely, but never wait on a silent server longer than `timeoutMs`: then drop the socket. */
export async function closeRedis(redis: Redis, timeoutMs: number = DEFAULT_REDIS_TIMEOUT_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([redis.quit().catch(() => {}), new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
  clearTimeout(timer);
  redis.disconnect();
}
