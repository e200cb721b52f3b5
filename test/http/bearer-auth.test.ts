/**
 * §5 bearer key on backend core endpoints: `Authorization: Bearer <API_KEY>` compared with
 * INTERNAL_API_KEY in constant time; 401 `Unauthorized` for a missing header, a missing Bearer
 * prefix or an invalid key; 403 `Forbidden` for a mismatch; 500 `Server misconfigured` when the
 * key is unset. Tested on a tiny Fastify app with the platform's own error handler.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBearerAuth } from '../../src/http/shared/bearer-auth.ts';
import { registerErrorHandler } from '../../src/http/shared/error-handler.ts';

const KEY = 'k3y-0f-the-backend-with-enough-entropy';

async function appWith(key: string | undefined): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  registerErrorHandler(app);
  app.addHook('onRequest', createBearerAuth(key));
  app.get('/protected', async () => ({ ok: true }));
  app.post('/protected', async () => ({ ok: true }));
  await app.ready();
  return app;
}

describe('§5 bearer key, INTERNAL_API_KEY set', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await appWith(KEY);
  });
  afterAll(() => app.close());
  const call = (authorization?: string | string[], method: 'GET' | 'POST' = 'GET') =>
    app.inject({ method, url: '/protected', headers: authorization === undefined ? {} : ({ authorization } as Record<string, string>) });

  it('the right key → 200 and the handler runs', async () => {
    const res = await call(`Bearer ${KEY}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true });
    expect((await call(`Bearer ${KEY}`, 'POST')).statusCode).toBe(200);
  });

  it.each([
    ['no Authorization header', undefined],
    ['Basic scheme', 'Basic x'],
    ['Basic with the right key', `Basic ${KEY}`],
    ['the bare key without prefix', KEY],
    ['"Bearer" alone', 'Bearer'],
    ['"Bearer " with an empty key', 'Bearer '],
    ['"Bearer " with only spaces', 'Bearer    '],
    ['an empty header', ''],
    ['lower-case prefix', `bearer ${KEY}`],
  ])('%s → 401 {error:"Unauthorized"}', async (_l, header) => {
    const res = await call(header);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });

  it.each([
    ['a wrong key', 'Bearer wrong-key'],
    ['the key with a suffix', `Bearer ${KEY}x`],
    ['a prefix of the key', `Bearer ${KEY.slice(0, -1)}`],
    ['the key in another case', `Bearer ${KEY.toUpperCase()}`],
    ['a very long key', `Bearer ${'a'.repeat(10_000)}`],
  ])('%s → 403 {error:"Forbidden"}', async (_l, header) => {
    const res = await call(header);
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ error: 'Forbidden' });
  });

  it('an unknown route behind the hook still needs the key (401 before 404)', async () => {
    const res = await app.inject({ method: 'GET', url: '/nope' });
    expect([401, 404]).toContain(res.statusCode);
    expect(res.json()).toHaveProperty('error');
  });
});

describe('§5 bearer key, INTERNAL_API_KEY unset → 500 Server misconfigured', () => {
  it.each([
    ['no header', undefined],
    ['any bearer key', 'Bearer anything'],
    ['an empty bearer key', 'Bearer '],
  ])('%s → 500 {error:"Server misconfigured"}', async (_l, header) => {
    for (const key of [undefined, '']) {
      const app = await appWith(key);
      try {
        const res = await app.inject({ method: 'GET', url: '/protected', headers: header === undefined ? {} : { authorization: header } });
        expect(res.statusCode).toBe(500);
        expect(res.json()).toEqual({ error: 'Server misconfigured' });
      } finally {
        await app.close();
      }
    }
  });
});

describe('§5 the comparison is constant-time (docs/architecture.md rule 6)', () => {
  it('bearer-auth compares through secretMatcher: both sides hashed, then timingSafeEqual', async () => {
    const { readFileSync } = await import('node:fs');
    const src = readFileSync(new URL('../../src/http/shared/bearer-auth.ts', import.meta.url), 'utf8');
    expect(src).toMatch(/secretMatcher\(/);
    expect(src).not.toMatch(/===\s*internalApiKey|internalApiKey\s*===/);
    const crypto = await import('../../src/lib/crypto.ts');
    expect(crypto.safeEqual('abc', 'abc')).toBe(true);
    expect(crypto.safeEqual('abc', 'abcd')).toBe(false);
    const matches = crypto.secretMatcher('abc');
    expect([matches('abc'), matches('abcd'), matches(''), matches('ab')]).toEqual([true, false, false, false]);
    expect(crypto.secretMatcher.toString()).toMatch(/timingSafeEqual/);
  });
});
