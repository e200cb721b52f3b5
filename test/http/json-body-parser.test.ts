/**
 * The JSON body parser of both apps (src/http/shared/base-app.ts): a body in which mayPoison()
 * finds neither `proto` (in `__proto__` and in `prototype`) nor a `\u` escape is parsed by JSON.parse alone; any
 * other goes through Fastify's parser with its prototype-poisoning checks. Both paths must answer
 * alike: the same values, the same 400s, poisoning refused however the key is spelled.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createBaseApp, mayPoison } from '../../src/http/shared/base-app.ts';

let app: App;
beforeAll(async () => {
  app = await createBaseApp({ title: 't', description: 't', version: '0', logLevel: 'silent', bodyLimit: 1_000_000, trustProxy: false });
  app.post('/echo', async (request) => ({ body: request.body ?? null }));
  await app.ready();
});
afterAll(() => app.close());

const post = (payload: string) => app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload });

describe('mayPoison', () => {
  it('flags `proto` (in both poisoning keys) and any \\u escape, nothing else', () => {
    expect(mayPoison('{"a":"b"}')).toBe(false);
    expect(mayPoison('{"messages":[{"role":"user","content":"structure, prot, construct"}]}')).toBe(false);
    // a constructor key alone is no poisoning: secure-json-parse accepts it as JSON.parse does
    expect(mayPoison('{"constructor":{"a":1}}')).toBe(false);
    expect(mayPoison('{"__proto__":{}}')).toBe(true);
    expect(mayPoison('{"constructor":{"prototype":{}}}')).toBe(true);
    expect(mayPoison('{"a":"\\u00e9"}')).toBe(true);
    expect(mayPoison('{"\\u005f_proto__":{}}')).toBe(true);
    expect(mayPoison('{"a":"the word prototype in a value"}')).toBe(true);
  });
});

describe('JSON bodies, fast path and checked path alike', () => {
  it('parses ordinary JSON to the same value on either path', async () => {
    for (const value of [
      { model: 'm', messages: [{ role: 'user', content: 'hi' }], temperature: 0.2 },
      { text: 'the word prototype inside a value' }, // checked path, accepted
      { constructor: { a: 1 } }, // fast path: secure-json-parse accepts a constructor key without a prototype
      { text: 'é and 😀 as escapes', n: [1, 2, 3] },
      [1, 'two', null],
      'a string',
      42,
    ]) {
      for (const payload of [
        JSON.stringify(value),
        JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
      ]) {
        const res = await post(payload);
        expect(res.statusCode, payload).toBe(200);
        expect(res.json().body).toEqual(value);
      }
    }
  });

  it('refuses prototype poisoning however the key is spelled (400, nothing parsed)', async () => {
    for (const payload of [
      '{"__proto__":{"isAdmin":true}}',
      '{"a":{"__proto__":{"isAdmin":true}}}',
      '{"\\u005f_proto__":{"isAdmin":true}}',
      '{"__pr\\u006fto__":{"isAdmin":true}}',
      '{"constructor":{"prototype":{"isAdmin":true}}}',
      '{"\\u0063onstructor":{"prototype":{"isAdmin":true}}}',
    ]) {
      const res = await post(payload);
      expect(res.statusCode, payload).toBe(400);
      expect(typeof res.json().error).toBe('string');
    }
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
  });

  it('answers invalid JSON with the same 400 on either path', async () => {
    const fast = await post('{"email":');
    const checked = await post('{"email":"\\u00e9",');
    expect(fast.statusCode).toBe(400);
    expect(checked.statusCode).toBe(400);
    expect(fast.json()).toEqual(checked.json());
  });

  it('still takes an empty body as no body', async () => {
    const res = await post('  ');
    expect(res.statusCode).toBe(200);
    expect(res.json().body).toBeNull();
  });
});
