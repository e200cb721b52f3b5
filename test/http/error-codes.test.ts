/**
 * One error vocabulary (docs/architecture.md "Errors"): every AppError names a catalogue code
 * (src/lib/error-codes.ts), the catalogue decides status and body code, and both OpenAPI
 * descriptions list it.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeForBody, ERROR_CODES, errorCatalogue, PUBLIC_ERROR_CODES } from '../../src/lib/error-codes.ts';
import { AppError } from '../../src/lib/errors.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const SRC = resolve(import.meta.dirname, '../../src');
const sources = (dir: string): string[] =>
  readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });

describe('the catalogue', () => {
  it('every body code belongs to exactly one entry, so a code passed on from the backend maps back', () => {
    const bodies = Object.values(ERROR_CODES).flatMap((d) => ('body' in d ? [d.body] : []));
    expect(new Set(bodies).size).toBe(bodies.length);
    for (const b of bodies) expect(ERROR_CODES[codeForBody(b)!]).toMatchObject({ body: b });
    expect(PUBLIC_ERROR_CODES).toEqual([...new Set(bodies)].sort());
  });

  it('status and body code come from the catalogue; a status override is the only per-site choice', () => {
    const e = new AppError('AGENT_NOT_RUNNING', 'Agent x is stopped');
    expect([e.id, e.status, e.code, e.message]).toEqual(['AGENT_NOT_RUNNING', 409, 'AGENT_NOT_RUNNING', 'Agent x is stopped']);
    const internal = new AppError('TRADING_NOT_CONFIGURED');
    expect([internal.status, internal.code, internal.message]).toEqual([503, undefined, ERROR_CODES.TRADING_NOT_CONFIGURED.summary]);
    expect(new AppError('AGENT_LIMIT_REACHED', 'x', undefined, 429).status).toBe(429);
  });

  it('no source file raises an error with a bare status or a free-string code', () => {
    const offenders: string[] = [];
    for (const file of sources(SRC)) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/new AppError\(\s*([^,)]*)/g)) {
        const first = m[1]!.trim();
        if (/^\d/.test(first) || first === 'undefined' || (/^'/.test(first) && !(first.slice(1, -1) in ERROR_CODES)))
          offenders.push(`${file.slice(SRC.length)}: ${m[0]}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});

describe('in the running apps', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform();
  });
  afterAll(() => t?.close());

  it.each(['web', 'backend'] as const)('the %s OpenAPI description carries the catalogue and lists the body codes', async (app) => {
    const doc = (await t[app].inject({ method: 'GET', url: '/docs/json' })).json();
    expect(doc['x-error-codes']).toEqual(errorCatalogue());
    const text = JSON.stringify(doc);
    for (const code of PUBLIC_ERROR_CODES) expect(text).toContain(code);
  });

  it('an error without a body code answers {error} alone; one with a code adds it', async () => {
    // trading without TRADING_API_URL: TRADING_NOT_CONFIGURED has no body code
    const reg = await t.web.inject({
      method: 'POST',
      url: '/api/register',
      payload: { email: 'codes@example.com', password: 'correct horse battery' },
    });
    expect(reg.statusCode).toBe(201);
    const login = await t.web.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: 'codes@example.com', password: 'correct horse battery' },
    });
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const trading = await t.web.inject({ method: 'GET', url: '/api/trading/balances', headers: { cookie } });
    expect(trading.statusCode).toBeGreaterThanOrEqual(500);
    expect(Object.keys(trading.json())).not.toContain('code');
    // admin-only health for a non-admin: ADMIN_REQUIRED is a body code
    const admin = await t.web.inject({ method: 'GET', url: '/api/admin/health', headers: { cookie } });
    expect(admin.statusCode).toBe(403);
    expect(admin.json()).toMatchObject({ code: 'ADMIN_REQUIRED' });
  });
});
