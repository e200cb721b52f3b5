/**
 * An unreachable or silent REDIS_URL must not turn into slow or failed requests (register
 * answered 500 after 7-15 s): every Redis command is bounded (REDIS_TIMEOUT_MS) and the rate
 * limits fall back to per-process counters (src/lib/redis.ts, src/lib/rate-limiter.ts).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import { createRateLimiter } from '../../src/lib/rate-limiter.ts';
import { checkRedis } from '../../src/lib/redis.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

let silent: Server;
let silentPort: number;
const sockets: Socket[] = [];
let closedPort: number;

beforeAll(async () => {
  // accepts connections and never answers a byte: the "hung Redis" case
  silent = createServer((s) => sockets.push(s));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  silentPort = (silent.address() as { port: number }).port;
  closedPort = await freePort(); // nothing listens here
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => silent.close(r));
});

describe.each([
  ['nothing listening', () => `redis://127.0.0.1:${closedPort}`],
  ['a server that never answers', () => `redis://127.0.0.1:${silentPort}`],
])('REDIS_URL with %s', (_name, url) => {
  let t: TestPlatform;
  beforeAll(async () => {
    const u = url();
    t = await startTestPlatform(
      { REDIS_URL: u, REDIS_TIMEOUT_MS: '200', REGISTER_RATE_LIMIT: '2' },
      { rateLimiter: createRateLimiter(u, { timeoutMs: 200 }) },
    );
  });
  afterAll(() => t.close());

  it('the start-up check names the problem within its timeout', async () => {
    expect(await checkRedis(url(), 300)).toEqual(expect.any(String));
  });

  it('register and sign-in answer normally and the sign-up limit still applies (per process)', async () => {
    const started = Date.now();
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await t.web.inject({
        method: 'POST',
        url: '/api/register',
        payload: { email: `r${i}-${Date.now()}@example.com`, password: 'a long enough passphrase' },
      });
      statuses.push(r.statusCode);
    }
    expect(statuses).toEqual([201, 201, 429]);
    const login = await t.web.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: 'nobody@example.com', password: 'wrong password here' },
    });
    expect(login.statusCode).toBe(401);
    // bounded: a handful of 200 ms command timeouts at most, never ioredis's 7-15 s
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
