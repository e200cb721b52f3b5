/**
 * The web app serves the built dashboard (docs/dashboard.md): the page at `/`, `/login` and
 * `/dashboard/*` (no-cache, strict CSP), hashed assets immutable and gzipped, no path from the
 * request reaching the disk, API routes unaffected; without a build, a page saying how to build.
 * Also: the generated API types match the web app's OpenAPI description, and the first load stays
 * under the 200 KB gzipped JavaScript budget.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../scripts/build-dashboard.ts';
import { generate, TYPES_FILE } from '../../scripts/dashboard-types.ts';
import { webOpenApiDocument } from '../../scripts/openapi-doc.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const fixture = mkdtempSync(join(tmpdir(), 'dashboard-fixture-'));
mkdirSync(join(fixture, 'assets'));
const INDEX = '<!doctype html><title>fixture</title><script type="module" src="/assets/app-abc123.js"></script>';
const APP_JS = `console.log(${JSON.stringify('x'.repeat(4000))});`;
writeFileSync(join(fixture, 'index.html'), INDEX);
writeFileSync(join(fixture, 'assets', 'app-abc123.js'), APP_JS);
writeFileSync(join(fixture, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');

let t: TestPlatform;
let unbuilt: TestPlatform;
beforeAll(async () => {
  [t, unbuilt] = await Promise.all([
    startTestPlatform({ DASHBOARD_DIR: fixture }),
    startTestPlatform({ DASHBOARD_DIR: join(fixture, 'missing') }),
  ]);
});
afterAll(async () => {
  await Promise.all([t?.close(), unbuilt?.close()]);
  rmSync(fixture, { recursive: true, force: true });
});

describe('the page', () => {
  it.each([
    '/',
    '/login',
    '/login?error=AccessDenied',
    '/dashboard',
    '/dashboard/wallet?top_up=success',
    '/dashboard/agents/some-id',
    '/dashboard/calendar?connected=true',
  ])('GET %s → the single page, no-cache, with a strict Content-Security-Policy', async (url) => {
    const res = await t.web.inject({ method: 'GET', url });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe(INDEX);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['content-security-policy']).toContain("script-src 'self'");
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers['x-frame-options']).toBe('DENY');
  });

  it('answers 304 to a matching If-None-Match', async () => {
    const first = await t.web.inject({ method: 'GET', url: '/dashboard' });
    const again = await t.web.inject({ method: 'GET', url: '/dashboard', headers: { 'if-none-match': String(first.headers.etag) } });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
  });
});

describe('assets', () => {
  it('a hashed asset is immutable for a year and gzipped when the client accepts it', async () => {
    const plain = await t.web.inject({ method: 'GET', url: '/assets/app-abc123.js' });
    expect(plain.statusCode).toBe(200);
    expect(plain.body).toBe(APP_JS);
    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    const gz = await t.web.inject({ method: 'GET', url: '/assets/app-abc123.js', headers: { 'accept-encoding': 'gzip, br' } });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.rawPayload).toString()).toBe(APP_JS);
  });

  it('top-level files of the build are served; unknown assets and traversal attempts are a JSON 404', async () => {
    expect((await t.web.inject({ method: 'GET', url: '/favicon.svg' })).headers['content-type']).toBe('image/svg+xml');
    for (const url of [
      '/assets/nope.js',
      '/assets/../index.html',
      '/assets/%2e%2e/%2e%2e/package.json',
      '/assets/..%2f..%2fpackage.json',
    ]) {
      const res = await t.web.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json(), url).toEqual({ error: 'Not found' });
    }
  });

  it('API routes are untouched: an unknown /api path is still a JSON 404, and the pages are not in the OpenAPI description', async () => {
    const res = await t.web.inject({ method: 'GET', url: '/api/does-not-exist' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: 'Not found' });
    const doc = (await t.web.inject({ method: 'GET', url: '/docs/json' })).json() as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).filter((p) => !p.startsWith('/api/'))).toEqual([]);
  });
});

it('without a build, the page says how to build it (503, not cached) and the API still works', async () => {
  const res = await unbuilt.web.inject({ method: 'GET', url: '/dashboard' });
  expect(res.statusCode).toBe(503);
  expect(res.headers['cache-control']).toBe('no-store');
  expect(res.body).toContain('npm run build:dashboard');
  expect((await unbuilt.web.inject({ method: 'GET', url: '/api/health' })).statusCode).toBe(200);
});

it('dashboard/src/api/openapi.gen.ts is generated from the current web OpenAPI description (run npm run dashboard:types)', async () => {
  expect(readFileSync(TYPES_FILE, 'utf8')).toBe(generate((await webOpenApiDocument()) as never));
});

it('the real build: first load is under 200 KB of gzipped JavaScript, and index.html names only built files', async () => {
  const out = mkdtempSync(join(tmpdir(), 'dashboard-build-'));
  try {
    await buildDashboard(out);
    const index = readFileSync(join(out, 'index.html'), 'utf8');
    const scripts = [...index.matchAll(/src="\/(assets\/[^"]+\.js)"/g)].map((m) => m[1]!);
    expect(scripts.length).toBeGreaterThan(0);
    const js = readdirSync(join(out, 'assets')).filter((f) => f.endsWith('.js'));
    const gz = (f: string) => gzipSync(readFileSync(join(out, 'assets', f)), { level: 9 }).length;
    // what the first page load fetches: the scripts and module preloads index.html names
    const first = [...index.matchAll(/(?:src|href)="\/assets\/([^"]+\.js)"/g)].map((m) => m[1]!);
    expect(first.reduce((n, f) => n + gz(f), 0)).toBeLessThan(200 * 1024);
    // chunks loaded later (the markdown renderer of the chat) have their own budget
    for (const f of js.filter((f) => !first.includes(f))) expect(gz(f), f).toBeLessThan(80 * 1024);
    for (const s of scripts) expect(js).toContain(s.slice('assets/'.length));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}, 60_000);
