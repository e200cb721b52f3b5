/**
 * One error vocabulary (docs/architecture.md "Errors"): every AppError names a catalogue code
 * (src/lib/error-codes.ts), the catalogue decides status and what clients see (a body `code`, or
 * a fixed `error` text on the gateway), and both OpenAPI descriptions list it.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BODY_CODES, codeForBody, ERROR_CODES, ERROR_TEXT_CODES, type ErrorDefinition, errorCatalogue } from '../../src/lib/error-codes.ts';
import { AppError } from '../../src/lib/errors.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const SRC = resolve(import.meta.dirname, '../../src');
const sources = (dir: string): string[] =>
  readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });

const definitions = Object.values(ERROR_CODES as Record<string, ErrorDefinition>);

describe('the catalogue', () => {
  it('every public identifier belongs to exactly one entry, so a code passed on from the backend maps back', () => {
    const bodies = definitions.flatMap((d) => (d.body ? [d.body] : []));
    const texts = definitions.flatMap((d) => (d.error ? [d.error] : []));
    const all = [...bodies, ...texts];
    expect(new Set(all).size).toBe(all.length);
    for (const b of bodies) expect(ERROR_CODES[codeForBody(b)!]).toMatchObject({ body: b });
    expect(BODY_CODES).toEqual([...bodies].sort());
    expect(ERROR_TEXT_CODES).toEqual([...texts].sort());
    // an entry is seen by clients one way at most: codeForBody relies on it
    expect(definitions.filter((d) => d.body && d.error)).toEqual([]);
  });

  it('the public identifiers of §7 and §4.8 are all catalogued', () => {
    for (const code of ['PLAN_REQUIRED', 'SUBSCRIPTION_REQUIRED', 'AGENT_LIMIT_REACHED', 'ADMIN_REQUIRED', 'MODEL_RESTRICTED'])
      expect(BODY_CODES).toContain(code);
    for (const text of [
      'payment_required',
      'session_required',
      'session_invalid',
      'insufficient_balance',
      'voucher_failed',
      'unknown_plugin',
      'no_plugin',
      'internal',
    ])
      expect(ERROR_TEXT_CODES).toContain(text);
  });

  it('status and body code come from the catalogue; a status override is the only per-site choice', () => {
    const e = new AppError('AGENT_NOT_RUNNING', 'Agent x is stopped');
    expect([e.id, e.status, e.code, e.message]).toEqual(['AGENT_NOT_RUNNING', 409, 'AGENT_NOT_RUNNING', 'Agent x is stopped']);
    const internal = new AppError('TRADING_NOT_CONFIGURED');
    expect([internal.status, internal.code, internal.message]).toEqual([503, undefined, ERROR_CODES.TRADING_NOT_CONFIGURED.summary]);
    expect(new AppError('AGENT_LIMIT_REACHED', 'x', undefined, 429).status).toBe(429);
    // a fixed text is the message itself; the explanation travels in extra
    const session = new AppError('SESSION_INVALID', undefined, { message: 'why' });
    expect([session.status, session.code, session.message, session.extra]).toEqual([402, undefined, 'session_invalid', { message: 'why' }]);
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

  it('no source file writes a catalogued identifier or a body code as a literal of its own', () => {
    const texts = new RegExp(`\\berror:\\s*['"\`](${ERROR_TEXT_CODES.join('|')})['"\`]`);
    const offenders: string[] = [];
    for (const file of sources(SRC)) {
      const name = file.slice(SRC.length);
      if (name.endsWith('/lib/error-codes.ts')) continue;
      const text = readFileSync(file, 'utf8');
      if (texts.test(text)) offenders.push(`${name}: a fixed error text`);
      // the agent runtime (src/runtime) is the agent's own server with its own protocol, not the platform's API
      if (!name.startsWith('/runtime/') && /\.send\(\{[^}]*\bcode:\s*['"`]/.test(text)) offenders.push(`${name}: a literal body code`);
    }
    expect(offenders).toEqual([]);
  });
});

/** Every `description` of an `error` or `code` property in an OpenAPI document. */
function propertyDescriptions(node: unknown, property: 'error' | 'code', out: string[] = []): string[] {
  if (Array.isArray(node)) for (const n of node) propertyDescriptions(n, property, out);
  else if (node && typeof node === 'object') {
    const o = node as Record<string, unknown>;
    const d = (o.properties as Record<string, { description?: unknown }> | undefined)?.[property]?.description;
    if (typeof d === 'string') out.push(d);
    for (const v of Object.values(o)) propertyDescriptions(v, property, out);
  }
  return out;
}

describe('in the running apps', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform();
  });
  afterAll(() => t?.close());

  it.each(['web', 'backend'] as const)(
    'the %s OpenAPI description carries the catalogue and its error schema lists the public identifiers',
    async (app) => {
      const doc = (await t[app].inject({ method: 'GET', url: '/docs/json' })).json();
      expect(doc['x-error-codes']).toEqual(errorCatalogue());
      const lists = (property: 'error' | 'code', ids: readonly string[]) =>
        propertyDescriptions(doc.paths, property).some((d) => ids.every((id) => d.includes(id)));
      expect(lists('code', BODY_CODES)).toBe(true);
      expect(lists('error', ERROR_TEXT_CODES)).toBe(true);
    },
  );

  it('the gateway documents its refusals with the fixed texts', async () => {
    const doc = (await t.web.inject({ method: 'GET', url: '/docs/json' })).json();
    const refusal = doc.paths['/api/v1/gateway'].post.responses['402'];
    const [described] = propertyDescriptions(refusal, 'error');
    for (const text of ['payment_required', 'session_required', 'session_invalid', 'insufficient_balance', 'voucher_failed'])
      expect(described).toContain(text);
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
