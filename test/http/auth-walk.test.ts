/**
 * Authentication is checked before validation on every secured route of both apps: walked from
 * each app's own OpenAPI description, every operation that declares a security requirement
 * answers 401 to a request without credentials whose body, query and path are all invalid, so
 * an anonymous caller learns nothing about a route's input rules and no handler runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/http/shared/base-app.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

type Operation = { security?: Record<string, string[]>[]; requestBody?: unknown };
type Doc = { paths: Record<string, Record<string, Operation>> };

let t: TestPlatform;
beforeAll(async () => {
  // every integration on (their secrets set), so no route answers 503 "not configured" first
  t = await startTestPlatform({ BRIDGE_SECRET: 'walk-bridge-secret', HOSTING_WEBHOOK_SECRET: 'walk-hook-secret' });
});
afterAll(() => t?.close());

async function secured(app: App) {
  const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json() as Doc;
  const out: { method: string; path: string; body: boolean }[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      if (!op.security || op.security.length === 0 || op.security.some((s) => Object.keys(s).length === 0)) continue;
      out.push({ method: method.toUpperCase(), path, body: Boolean(op.requestBody) });
    }
  }
  return out;
}

describe('every secured operation answers 401 before it validates its input', () => {
  for (const appName of ['web', 'backend'] as const) {
    it(`${appName} app`, async () => {
      const app = t[appName];
      const ops = await secured(app);
      expect(ops.length).toBeGreaterThan(10);
      const wrong: string[] = [];
      for (const op of ops) {
        // path parameters that no pattern accepts, a query that no schema accepts, a body that is not an object
        const url = `${op.path.replace(/\{[^}]+\}/g, '%00bad%2F..')}?limit=-1&depth=999&address=x&agentId=`;
        const res = await app.inject({
          method: op.method as 'GET',
          url,
          ...(op.method === 'GET' || op.method === 'DELETE'
            ? {}
            : { headers: { 'content-type': 'application/json' }, payload: '"not an object"' }),
        });
        if (res.statusCode !== 401) wrong.push(`${op.method} ${op.path} → ${res.statusCode} ${res.body.slice(0, 120)}`);
      }
      expect(wrong).toEqual([]);
    });
  }
});
