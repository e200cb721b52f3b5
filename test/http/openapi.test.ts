/**
 * OpenAPI 3.1 at /docs (JSON at /docs/json) on both apps, generated from the route schemas
 * (docs/architecture.md "Adding a domain and an endpoint"). Lists the §4.1 and §4.12 paths, and documents the paths the
 * specification leaves "not shown" (current user and profile).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform();
});
afterAll(() => t.close());

type Doc = {
  openapi: string;
  info: { title: string };
  paths: Record<string, Record<string, { responses?: Record<string, unknown>; requestBody?: unknown }>>;
};

describe('OpenAPI on the web app', () => {
  it('GET /docs/json → OpenAPI 3.1.x listing the §4.1 and §4.12 paths with their methods', async () => {
    const res = await t.web.inject({ method: 'GET', url: '/docs/json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as Doc;
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info.title).toBeTruthy();
    const expected: [string, string[]][] = [
      ['/api/register', ['post']],
      ['/api/auth/login', ['post']],
      ['/api/auth/session', ['get']],
      ['/api/auth/signout', ['post']],
      ['/api/auth/nonce', ['get', 'post']],
      ['/api/wallet-auth', ['post']],
      ['/api/user', ['get', 'post', 'patch']],
      ['/api/health', ['get']],
      ['/api/admin/health', ['get']],
    ];
    for (const [path, methods] of expected) {
      expect(doc.paths, path).toHaveProperty([path]);
      for (const m of methods) expect(doc.paths[path], `${m} ${path}`).toHaveProperty([m]);
    }
  });

  it('documents the §4.1 status codes of register and the request body fields', async () => {
    const doc = (await t.web.inject({ method: 'GET', url: '/docs/json' })).json() as Doc;
    const register = doc.paths['/api/register']!.post!;
    expect(Object.keys(register.responses ?? {}).sort()).toEqual(expect.arrayContaining(['201', '400', '403', '409', '429']));
    const body = JSON.stringify(register.requestBody);
    for (const f of ['email', 'password', 'name', 'referralCode']) expect(body).toContain(f);
    expect(Object.keys(doc.paths['/api/wallet-auth']!.post!.responses ?? {})).toEqual(expect.arrayContaining(['200', '400', '401']));
  });

  it('does not expose internal routes (the docs themselves)', async () => {
    const doc = (await t.web.inject({ method: 'GET', url: '/docs/json' })).json() as Doc;
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/docs'))).toBe(false);
  });

  it('GET /docs → an HTML page', async () => {
    const res = await t.web.inject({ method: 'GET', url: '/docs' });
    const final =
      res.statusCode >= 300 && res.statusCode < 400
        ? await t.web.inject({
            method: 'GET',
            url: String(res.headers.location).startsWith('/') ? String(res.headers.location) : `/docs/${res.headers.location}`,
          })
        : res;
    expect(final.statusCode).toBe(200);
    expect(String(final.headers['content-type'])).toMatch(/text\/html/);
    expect(final.body).toMatch(/<html/i);
  });
});

describe('OpenAPI on the backend app', () => {
  it('GET /docs/json → OpenAPI 3.1.x listing /health and the bearer security scheme (§5)', async () => {
    const res = await t.backend.inject({ method: 'GET', url: '/docs/json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as Doc & { components?: { securitySchemes?: Record<string, { type: string; scheme?: string }> } };
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.paths).toHaveProperty(['/health', 'get']);
    expect(Object.values(doc.components?.securitySchemes ?? {})).toContainEqual(
      expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    );
    // the backend does not serve the web app's routes
    expect(doc.paths).not.toHaveProperty(['/api/register']);
  });

  it('GET /docs → an HTML page', async () => {
    const res = await t.backend.inject({ method: 'GET', url: '/docs' });
    const final =
      res.statusCode >= 300 && res.statusCode < 400
        ? await t.backend.inject({
            method: 'GET',
            url: String(res.headers.location).startsWith('/') ? String(res.headers.location) : `/docs/${res.headers.location}`,
          })
        : res;
    expect(final.statusCode).toBe(200);
    expect(String(final.headers['content-type'])).toMatch(/text\/html/);
  });
});
