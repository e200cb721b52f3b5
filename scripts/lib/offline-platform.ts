/**
 * The platform built without a database or a listening port, for scripts that only need what the
 * apps register (scripts/openapi-doc.ts: the OpenAPI description; scripts/route-map.ts: the route
 * map): a pool that never connects (no request is served), fixed throw-away keys, silent logs.
 */
import { pino } from 'pino';
import { loadConfig } from '../../src/config/env.ts';
import { createDb } from '../../src/db/client.ts';
import { createMemoryRateLimiter } from '../../src/lib/rate-limiter.ts';
import { createPlatform } from '../../src/platform.ts';

/** `name` labels the throw-away settings; `env` adds settings (e.g. no dashboard directory). */
export function offlinePlatform(name: string, env: Record<string, string> = {}) {
  const config = loadConfig(
    { DATA_DIR: `/nonexistent-${name}`, LOG_LEVEL: 'silent', INTERNAL_API_KEY: name, PUBLIC_URL: 'http://localhost:3000', ...env },
    { readDotEnv: false },
  );
  const db = createDb(`postgres://${name}@127.0.0.1:1/none`, { poolSize: 1 });
  const platform = createPlatform({
    config,
    db,
    secrets: { walletEncryptionKey: Buffer.alloc(32, 1), secretsEncryptionKey: Buffer.alloc(32, 2) },
    logger: pino({ level: 'silent' }),
    rateLimiter: createMemoryRateLimiter(),
  });
  return {
    config,
    platform,
    /** closes the platform and the pool that never connected (apps are the caller's to close first) */
    async close() {
      await platform.close();
      await db.close();
    },
  };
}
