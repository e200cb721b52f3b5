/**
 * Cache evictions across replicas: a Redis pub/sub channel on which each process publishes what
 * it evicted and applies what others did (the session cache, the API key cache). Best effort by
 * design: commands are bounded by REDIS_TIMEOUT_MS so an eviction never waits for an unreachable
 * Redis, and a missed message only means another replica's entry lives out its short TTL.
 */
import { closeRedis, newRedis, redisOptions } from './redis.ts';

export type EvictionBus = { publish(message: string): void; close(): Promise<void> };

/** No Redis: nothing to tell (one process, or replicas that accept the TTL). */
export const localOnlyBus: EvictionBus = { publish() {}, close: async () => {} };

export function createEvictionBus(url: string, channel: string, onMessage: (m: string) => void, timeoutMs?: number): EvictionBus {
  const pub = newRedis(url, redisOptions(timeoutMs));
  // the subscriber holds a blocking connection: no command timeout, offline queue for SUBSCRIBE
  const sub = newRedis(url, { ...redisOptions(timeoutMs), commandTimeout: undefined, enableOfflineQueue: true });
  pub.on('error', () => {});
  sub.on('error', () => {});
  void sub.subscribe(channel).catch(() => {});
  sub.on('message', (_channel: string, message: string) => onMessage(message));
  return {
    publish(message) {
      void pub.publish(channel, message).catch(() => {});
    },
    async close() {
      await Promise.all([closeRedis(pub, timeoutMs), closeRedis(sub, timeoutMs)]);
    },
  };
}
