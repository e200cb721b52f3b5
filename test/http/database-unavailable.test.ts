/**
 * PostgreSQL unreachable (down or restarting) is answered 503 with a JSON error, fast, not 500:
 * the client did nothing wrong and a retry may succeed (the fault bench, docs/benchmarks.md "Load
 * and faults", kills the real server under load; here the pool points at a port nobody listens on).
 */
import Fastify from 'fastify';
import { afterAll, expect, it } from 'vitest';
import { createDb } from '../../src/db/client.ts';
import { freePort } from '../../src/db/embedded.ts';
import { isDatabaseUnavailable } from '../../src/db/errors.ts';
import { registerErrorHandler } from '../../src/http/shared/error-handler.ts';

const port = await freePort();
const db = createDb(`postgres://nobody:nothing@127.0.0.1:${port}/none`, { poolSize: 1 });
afterAll(() => db.close());

it('a query on an unreachable database answers 503 with a JSON error', async () => {
  const app = Fastify({ logger: false });
  registerErrorHandler(app);
  app.get('/q', async () => (await db.pool.query('select 1 as one')).rows);
  app.get('/bug', async () => {
    throw new Error('a bug');
  });
  const res = await app.inject({ method: 'GET', url: '/q' });
  expect(res.statusCode).toBe(503);
  expect(res.json()).toEqual({ error: 'Database unavailable, try again shortly' });
  // anything else unexpected stays a generic 500
  expect((await app.inject({ method: 'GET', url: '/bug' })).statusCode).toBe(500);
  await app.close();
});

it('tells connection failures from other database errors', () => {
  expect(isDatabaseUnavailable(Object.assign(new Error('the database system is starting up'), { code: '57P03' }))).toBe(true);
  expect(isDatabaseUnavailable(Object.assign(new Error('terminating connection'), { code: '57P01' }))).toBe(true);
  expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
  expect(isDatabaseUnavailable(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
  expect(isDatabaseUnavailable(new Error('a bug'))).toBe(false);
});
