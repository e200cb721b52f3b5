/**
 * Both apps' OpenAPI descriptions pass `redocly lint` (recommended rules, redocly.yaml) with no
 * error, and the rules src/http/shared/openapi.ts applies automatically hold for every route
 * (operationId, security, standard error responses, servers), so routes added later stay clean.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationIdFor } from '../../src/http/shared/openapi.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const REDOCLY = join(ROOT, 'node_modules/@redocly/cli/bin/cli.js');

type Operation = {
  operationId?: string;
  security?: Record<string, string[]>[];
  responses: Record<string, unknown>;
  parameters?: { in: string; name: string; schema?: Record<string, unknown> }[];
};
type Doc = { servers?: { url: string }[]; paths: Record<string, Record<string, Operation>>; tags?: { name: string }[] };
type Problem = { ruleId: string; severity: string; message: string; location: { pointer: string }[] };

let t: TestPlatform;
let dir: string;
const docs: Record<'web' | 'backend', Doc> = {} as never;

beforeAll(async () => {
  t = await startTestPlatform({ PUBLIC_URL: 'https://platform.test', BACKEND_URL: 'https://backend.platform.test' });
  dir = await mkdtemp(join(tmpdir(), 'openapi-lint-'));
  docs.web = (await t.web.inject({ method: 'GET', url: '/docs/json' })).json();
  docs.backend = (await t.backend.inject({ method: 'GET', url: '/docs/json' })).json();
});
afterAll(async () => {
  await t.close();
  await rm(dir, { recursive: true, force: true });
});

async function redoclyLint(name: string, doc: Doc): Promise<{ totals: { errors: number; warnings: number }; problems: Problem[] }> {
  const file = join(dir, `${name}.json`);
  await writeFile(file, JSON.stringify(doc, null, 2));
  // exit code 1 means "errors found": the JSON report on stdout says which
  const out = await run(process.execPath, [REDOCLY, 'lint', file, '--format=json', '--config', join(ROOT, 'redocly.yaml')], {
    cwd: ROOT,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
  return JSON.parse(out.stdout);
}

const operations = (doc: Doc) =>
  Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ path, method, op })));

describe.each(['web', 'backend'] as const)('OpenAPI of the %s app', (app) => {
  it('redocly lint (recommended) finds no error', async () => {
    const report = await redoclyLint(app, docs[app]);
    const errors = report.problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`);
    expect(errors).toEqual([]);
    expect(report.totals.errors).toBe(0);
  }, 60_000);

  it('every operation has a unique operationId and declares its security; servers is the public address', () => {
    const ids = operations(docs[app]).map(({ op }) => op.operationId);
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, method, op } of operations(docs[app])) expect(Array.isArray(op.security), `${method} ${path}`).toBe(true);
    expect(docs[app].servers).toEqual([{ url: app === 'web' ? 'https://platform.test' : 'https://backend.platform.test' }]);
  });
});

describe('rules applied to every route', () => {
  const op = (app: 'web' | 'backend', method: string, path: string) => {
    const o = docs[app].paths[path]?.[method];
    if (!o) throw new Error(`${method} ${path} not documented`);
    return o;
  };

  it('public routes say `security: []`; session routes name the cookie', () => {
    expect(op('web', 'post', '/api/auth/login').security).toEqual([]);
    expect(op('web', 'get', '/api/auth/session').security).toEqual([]);
    expect(op('web', 'post', '/api/wallet').security).toEqual([{ sessionCookie: [] }]);
    expect(op('backend', 'get', '/health').security).toEqual([]);
  });

  it('bearer-key routes document 401/403/500 (§5); /api/ai/* documents 429 (§8)', () => {
    for (const { path, op: o } of operations(docs.backend)) {
      if (!o.security?.some((r) => 'bearerKey' in r)) continue;
      expect(Object.keys(o.responses), path).toEqual(expect.arrayContaining(['401', '403', '500']));
      if (path.startsWith('/api/ai/')) expect(Object.keys(o.responses), path).toContain('429');
    }
    expect(operations(docs.backend).filter(({ path }) => path.startsWith('/api/ai/')).length).toBeGreaterThan(3);
  });

  it('documents the headers the backend reads (x-user-id, plan headers) and the 301s of hosting-mcp', () => {
    const headers = (o: Operation) => (o.parameters ?? []).filter((p) => p.in === 'header').map((p) => p.name);
    expect(headers(op('backend', 'get', '/api/agents'))).toContain('x-user-id');
    expect(headers(op('backend', 'post', '/api/ai/chat'))).toEqual(
      expect.arrayContaining(['x-user-id', 'x-user-email', 'x-user-plan', 'x-stripe-subscription-id']),
    );
    expect(Object.keys(op('backend', 'get', '/api/hosting-mcp/docs').responses)).toContain('301');
    expect(Object.keys(op('backend', 'get', '/api/hosting-mcp/github').responses)).toContain('301');
  });

  it('no parameter has an empty schema', () => {
    for (const app of ['web', 'backend'] as const) {
      for (const { path, method, op: o } of operations(docs[app])) {
        for (const p of o.parameters ?? []) {
          const keys = Object.keys(p.schema ?? {}).filter((k) => k !== 'description');
          expect(keys.length, `${method} ${path} ${p.name}`).toBeGreaterThan(0);
        }
      }
    }
  });

  it('operationId from method and path', () => {
    expect(operationIdFor('get', '/api/wallet/address')).toBe('getApiWalletAddress');
    expect(operationIdFor('post', '/api/agents/{id}/start')).toBe('postApiAgentsByIdStart');
    expect(operationIdFor('delete', '/api/hosting-mcp/validate-config')).toBe('deleteApiHostingMcpValidateConfig');
  });
});
