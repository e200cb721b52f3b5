/**
 * §8 AI rate limit: AI_RATE_LIMIT requests per minute per IP across all /api/ai/*, in-process,
 * and shared by two app instances through Redis when REDIS_URL is set (skipped otherwise).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisRateLimiter } from '../../src/lib/rate-limiter.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const auth = { authorization: 'Bearer test-internal-key' };
const plan = { ...auth, 'x-user-plan': 'solo', 'x-stripe-subscription-id': 'sub_1' };
let router: FakeOpenAi;

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: 'k' });
});
afterAll(async () => {
  await router?.close();
});

const hit = (p: TestPlatform, url: string, ip: string) =>
  url === '/api/ai/chat'
    ? p.backend.inject({ method: 'POST', url, headers: plan, payload: { messages: [{ role: 'user', content: 'hi' }] }, remoteAddress: ip })
    : p.backend.inject({ method: 'GET', url, headers: auth, remoteAddress: ip });

describe('AI rate limit (in-process)', () => {
  it('counts every /api/ai/* route per IP and answers 429 JSON past the limit', async () => {
    await withTestPlatform({ ROUTER_API_KEY: 'k', ROUTER_BASE_URL: router.url, AI_RATE_LIMIT: '3' }, async (p) => {
      expect((await hit(p, '/api/ai/health', '10.1.1.1')).statusCode).toBe(200);
      expect((await hit(p, '/api/ai/models', '10.1.1.1')).statusCode).toBe(200);
      expect((await hit(p, '/api/ai/chat', '10.1.1.1')).statusCode).toBe(200);
      const over = await hit(p, '/api/ai/chat', '10.1.1.1');
      expect(over.statusCode).toBe(429);
      expect(over.json()).toMatchObject({ error: 'Too many requests' });
      expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
      expect((await hit(p, '/api/ai/health', '10.1.1.1')).statusCode).toBe(429);
      // another IP has its own window; non-AI routes are not counted
      expect((await hit(p, '/api/ai/health', '10.1.1.2')).statusCode).toBe(200);
      expect((await p.backend.inject({ method: 'GET', url: '/health', remoteAddress: '10.1.1.1' })).statusCode).toBe(200);
    });
  });

  it('defaults to 30 per minute', async () => {
    await withTestPlatform({}, async (p) => {
      for (let i = 0; i < 30; i++) expect((await hit(p, '/api/ai/health', '10.2.2.2')).statusCode).toBe(200);
      expect((await hit(p, '/api/ai/health', '10.2.2.2')).statusCode).toBe(429);
    });
  });
});

describe.skipIf(!process.env.REDIS_URL)('AI rate limit shared through Redis (REDIS_URL)', () => {
  it('two app instances share one window', async () => {
    const prefix = `test-ai-${randomBytes(4).toString('hex')}:`;
    const a = await startTestPlatform({ AI_RATE_LIMIT: '4' }, { rateLimiter: createRedisRateLimiter(process.env.REDIS_URL!, prefix) });
    const b = await startTestPlatform({ AI_RATE_LIMIT: '4' }, { rateLimiter: createRedisRateLimiter(process.env.REDIS_URL!, prefix) });
    try {
      expect((await hit(a, '/api/ai/health', '10.3.3.3')).statusCode).toBe(200);
      expect((await hit(b, '/api/ai/health', '10.3.3.3')).statusCode).toBe(200);
      expect((await hit(a, '/api/ai/models', '10.3.3.3')).statusCode).toBe(200);
      expect((await hit(b, '/api/ai/health', '10.3.3.3')).statusCode).toBe(200);
      const over = await hit(a, '/api/ai/health', '10.3.3.3');
      expect(over.statusCode).toBe(429);
      expect(over.json()).toMatchObject({ error: 'Too many requests' });
      expect((await hit(b, '/api/ai/health', '10.3.3.3')).statusCode).toBe(429);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
