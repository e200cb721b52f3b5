/**
 * The OpenAPI descriptions of both apps without a database or a listening port: the routes are
 * registered against a pool that never connects (no request is served), so each document is
 * exactly what the app's GET /docs/json answers. scripts/dashboard-types.ts types the dashboard's
 * client from the web app's.
 *
 * docs/openapi/web.json and docs/openapi/backend.json are those documents, committed: what a
 * client generator reads without starting the platform, and the record a change to the API
 * surface shows up in (test/docs/openapi.test.ts fails when they are stale, so a refactoring that
 * claims "no behaviour change" is checked against them, and a real change is reviewed as a diff).
 *
 *   npm run openapi              rewrite docs/openapi/*.json
 *   npm run openapi -- --check   exit 1 when they are stale
 *   node scripts/openapi-doc.ts --print   print the web app's document
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { App } from '../src/http/shared/base-app.ts';
import { offlinePlatform } from './lib/offline-platform.ts';

export const OPENAPI_DIR = resolve(import.meta.dirname, '../docs/openapi');
export const REGENERATE_OPENAPI = 'npm run openapi';
type AppName = 'web' | 'backend';

/** Each app's document, built the way the app builds it (no dashboard: its files would be routes). */
export async function openApiDocuments(apps: readonly AppName[] = ['web', 'backend']): Promise<Record<AppName, Record<string, unknown>>> {
  const offline = offlinePlatform('openapi-doc', { DASHBOARD_DIR: '/nonexistent-openapi-doc/dashboard' });
  const docs = {} as Record<AppName, Record<string, unknown>>;
  try {
    for (const name of apps) {
      const app: App = name === 'web' ? await offline.platform.buildWebApp() : await offline.platform.buildBackendApp();
      try {
        await app.ready();
        docs[name] = (await app.inject({ method: 'GET', url: '/docs/json' })).json();
      } finally {
        await app.close();
      }
    }
  } finally {
    await offline.close();
  }
  return docs;
}

export async function webOpenApiDocument(): Promise<Record<string, unknown>> {
  return (await openApiDocuments(['web'])).web;
}

const text = (doc: Record<string, unknown>) => `${JSON.stringify(doc, null, 2)}\n`;

/** The committed files that differ from the documents the code builds now. */
export async function staleOpenApiFiles(): Promise<string[]> {
  const docs = await openApiDocuments();
  return (Object.keys(docs) as AppName[]).filter((name) => {
    try {
      return readFileSync(join(OPENAPI_DIR, `${name}.json`), 'utf8') !== text(docs[name]);
    } catch {
      return true;
    }
  });
}

if (import.meta.main) {
  if (process.argv.includes('--print')) process.stdout.write(text(await webOpenApiDocument()));
  else if (process.argv.includes('--check')) {
    const stale = await staleOpenApiFiles();
    if (stale.length) {
      console.error(`docs/openapi/{${stale.join(',')}}.json are stale: run ${REGENERATE_OPENAPI} and review the diff`);
      process.exit(1);
    }
  } else {
    const docs = await openApiDocuments();
    mkdirSync(OPENAPI_DIR, { recursive: true });
    for (const name of Object.keys(docs) as AppName[]) writeFileSync(join(OPENAPI_DIR, `${name}.json`), text(docs[name]));
  }
}
