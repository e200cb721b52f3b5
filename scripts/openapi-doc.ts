/**
 * Prints the web app's OpenAPI description (JSON) without a database or a listening port: the
 * routes are registered against a pool that never connects (no request is served), so the
 * document is exactly what GET /docs/json answers. Used by scripts/dashboard-types.ts.
 */
import { pino } from 'pino';
import { loadConfig } from '../src/config/env.ts';
import { createDb } from '../src/db/client.ts';
import { createMemoryRateLimiter } from '../src/lib/rate-limiter.ts';
import { createPlatform } from '../src/platform.ts';

export async function webOpenApiDocument(): Promise<Record<string, unknown>> {
  const config = loadConfig(
    { DATA_DIR: '/nonexistent-openapi-doc', LOG_LEVEL: 'silent', INTERNAL_API_KEY: 'openapi-doc', PUBLIC_URL: 'http://localhost:3000' },
    { readDotEnv: false },
  );
  const db = createDb('postgres://openapi-doc@127.0.0.1:1/none', { poolSize: 1 });
  const platform = createPlatform({
    config,
    db,
    secrets: { walletEncryptionKey: Buffer.alloc(32, 1), secretsEncryptionKey: Buffer.alloc(32, 2) },
    logger: pino({ level: 'silent' }),
    rateLimiter: createMemoryRateLimiter(),
  });
  const web = await platform.buildWebApp();
  try {
    await web.ready();
    return (await web.inject({ method: 'GET', url: '/docs/json' })).json();
  } finally {
    await web.close();
    await platform.close();
    await db.close();
  }
}

if (import.meta.main) process.stdout.write(`${JSON.stringify(await webOpenApiDocument(), null, 2)}\n`);
