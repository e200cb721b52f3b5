/**
 * A wrong method on a known path answers 405 with `Allow` (both apps), an unknown path 404; a
 * JSON request with an empty body is a request without a body (§4.1: signout always 200).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform();
});
afterAll(() => t.close());

describe('405 Method not allowed', () => {
  it('web: DELETE /api/auth/session → 405, Allow lists GET and HEAD, JSON error', async () => {
    const res = await t.web.inject({ method: 'DELETE', url: '/api/auth/session' });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    expect(res.json()).toEqual({ error: 'Method not allowed' });
  });

  it('web: a path with a parameter (PUT /api/keys/<id>) → 405 with its methods; query strings ignored', async () => {
    const res = await t.web.inject({ method: 'PUT', url: '/api/keys/abc?x=1' });
    expect(res.statusCode).toBe(405);
    expect(String(res.headers.allow).split(', ')).toEqual(expect.arrayContaining(['GET', 'DELETE']));
    expect(String(res.headers.allow)).not.toContain('PUT');
  });

  it('backend: GET /api/validate-key → 405 Allow: POST; the bearer key is not needed to learn that', async () => {
    const res = await t.backend.inject({ method: 'GET', url: '/api/validate-key' });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('POST');
    expect(res.json().error).toBe('Method not allowed');
  });

  it('unknown paths stay 404 (also one segment too many, and a trailing slash)', async () => {
    for (const url of ['/api/nothing-here', '/api/keys/abc/extra', '/api/auth/session/']) {
      const res = await t.web.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(404);
      expect(res.headers.allow, url).toBeUndefined();
      expect(res.json()).toEqual({ error: 'Not found' });
    }
  });
});

describe('empty JSON body', () => {
  it('POST /api/auth/signout with Content-Type application/json and no body → 200, session gone (§4.1)', async () => {
    const user = await signUp(t.web);
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/auth/signout',
      headers: { cookie: user.cookie, 'content-type': 'application/json' },
      payload: '',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true });
    const session = await t.web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: user.cookie } });
    expect(session.json()).toEqual({ user: null });
  });

  it('GET and POST /api/auth/nonce with an empty JSON body → 200', async () => {
    for (const method of ['GET', 'POST'] as const) {
      const res = await t.web.inject({
        method,
        url: '/api/auth/nonce',
        headers: { 'content-type': 'application/json; charset=utf-8' },
        payload: ' ',
      });
      expect(res.statusCode, method).toBe(200);
      expect(typeof res.json().nonce).toBe('string');
    }
  });

  it('a route that needs a body still answers its own 400; invalid JSON is still 400', async () => {
    const empty = await t.web.inject({
      method: 'POST',
      url: '/api/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: '',
    });
    expect(empty.statusCode).toBe(400);
    expect(typeof empty.json().error).toBe('string');
    const bad = await t.web.inject({
      method: 'POST',
      url: '/api/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: '{"email":',
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: 'Body is not valid JSON' });
  });

  it('prototype poisoning is still refused', async () => {
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: '{"__proto__":{"x":1},"email":"a@b.c","password":"12345678"}',
    });
    expect(res.statusCode).toBe(400);
  });
});
