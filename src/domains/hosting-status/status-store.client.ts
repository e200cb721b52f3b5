/**
 * The Redis-over-REST key-value store (Upstash-compatible) that keeps the latest hosting status
 * record (§6), behind an interface (docs/architecture.md rule 4). The real implementation uses `@upstash/redis`;
 * tests run it against a local server speaking the same REST protocol (test/fakes/kv-rest.ts).
 */
import { Redis } from '@upstash/redis';

export interface StatusStore {
  /** SET key value EX ttlSeconds */
  set(key: string, value: string, ttlSeconds: number): Promise<void>;
}

export function createUpstashStatusStore(options: { url: string; token: string; timeoutMs: number }): StatusStore {
  const redis = new Redis({
    url: options.url,
    token: options.token,
    // one retry, each attempt bounded: a dead store must not hold the webhook for seconds
    retry: { retries: 1, backoff: () => 50 },
    signal: () => AbortSignal.timeout(options.timeoutMs),
    enableTelemetry: false,
    // one command per webhook: batching into /pipeline would only add latency
    enableAutoPipelining: false,
    automaticDeserialization: false,
  });
  return {
    async set(key, value, ttlSeconds) {
      await redis.set(key, value, { ex: ttlSeconds });
    },
  };
}
