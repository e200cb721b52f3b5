/**
 * Prints the web app's OpenAPI description (JSON) without a database or a listening port: the
 * routes are registered against a pool that never connects (no request is served), so the
 * document is exactly what GET /docs/json answers. Used by scripts/dashboard-types.ts.
 */
import { offlinePlatform } from './lib/offline-platform.ts';

export async function webOpenApiDocument(): Promise<Record<string, unknown>> {
  const offline = offlinePlatform('openapi-doc');
  const web = await offline.platform.buildWebApp();
  try {
    await web.ready();
    return (await web.inject({ method: 'GET', url: '/docs/json' })).json();
  } finally {
    await web.close();
    await offline.close();
  }
}

if (import.meta.main) process.stdout.write(`${JSON.stringify(await webOpenApiDocument(), null, 2)}\n`);
