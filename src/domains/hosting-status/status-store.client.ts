/**
 * The Redis-over-REST key-value store (Upstash-compatible) that keeps the latest hosting status
 * record (§6), behind an interface (docs/architecture.md rule 4). The real implementation uses `@upstash/redis`;
 * tests run it against a local server speaking the same REST protocol (test/fakes/kv-rest.ts).
 */
import type { Redis } from '@upstash/redis';

export interface StatusStore {
  /** SET key value EX ttlSeconds */
  set(key: string, value: string, ttlSeconds: number): Promise<void>;
}

export function createUpstashStatusStore(options: { url: string; token: string; timeoutMs: number }): StatusStore {
  // the client is loaded with the first write (~8 MB resident a process that never writes does not pay)
  let made: Promise<Redis> | undefined;
  const client = () => (made ??= import('@upstash/redis').then(({ Redis }) => create(Redis, options)));
  return {
    async set(key, value, ttlSeconds) {
      await (await client()).set(key, value, { ex: ttlSeconds });
    },
  };
}

function create(Redis: typeof import('@upstash/redis').Redis, options: { url: string; token: string; timeoutMs: number }): Redis {
  return new Redis({
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
}
