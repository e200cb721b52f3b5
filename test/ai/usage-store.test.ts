/**
 * The AI usage store (src/domains/ai/usage.ts), against a real PostgreSQL: rows are written within
 * the flush window without anyone asking, rows of one window share one statement, a full batch
 * does not wait for the window, quotas see queued and in-flight rows, and nothing is lost or
 * written twice when recording and flushing race (batching must keep the counts).
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageRow } from '../../src/domains/ai/ai.repo.ts';
import { createUsageStore } from '../../src/domains/ai/usage.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database?.drop());

const NOW = new Date();
const row = (userId: string, tokens = 10): UsageRow => ({
  userId,
  agentId: null,
  model: 'openai/gpt-4o-mini',
  provider: 'router',
  promptTokens: tokens / 2,
  completionTokens: tokens / 2,
  totalTokens: tokens,
  cost: tokens * 1e-6,
  createdAt: NOW,
});

/** The store over the test database, counting the insert statements it sends. */
function storeWithCounter(flushDelayMs: number) {
  const statements = { count: 0 };
  const pool = database.db.pool;
  const counting = new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver);
      return (config: { name?: string }, ...rest: unknown[]) => {
        if (config?.name === 'ai_insert_usage') statements.count += 1;
        return (target.query as (...a: unknown[]) => unknown)(config, ...rest);
      };
    },
  });
  const store = createUsageStore({ db: { kysely: database.db.kysely, pool: counting }, flushDelayMs });
  return { store, statements };
}

const rowsOf = async (userId: string) => {
  const r = await sql<{ n: number; tokens: number }>`
    select count(*)::int as n, coalesce(sum(total_tokens), 0)::int as tokens from ai_usage where user_id = ${userId}`.execute(
    database.db.kysely,
  );
  const m = await sql<{ requests: number; tokens: number }>`
    select coalesce(sum(requests), 0)::int as requests, coalesce(sum(total_tokens), 0)::int as tokens
      from ai_usage_monthly where user_id = ${userId}`.execute(database.db.kysely);
  return { rows: r.rows[0]!.n, tokens: r.rows[0]!.tokens, rollupRequests: m.rows[0]!.requests, rollupTokens: m.rows[0]!.tokens };
};

const waitFor = async (check: () => Promise<boolean>, ms = 5_000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('timed out');
};

describe('AI usage store', () => {
  it('writes a lone row within the window, without a flush', async () => {
    const { store } = storeWithCounter(50);
    store.record(row('lone'));
    expect((await rowsOf('lone')).rows).toBe(0); // not on the request's path
    await waitFor(async () => (await rowsOf('lone')).rows === 1);
    expect(await rowsOf('lone')).toEqual({ rows: 1, tokens: 10, rollupRequests: 1, rollupTokens: 10 });
    await store.close();
  });

  it('rows of one window share one statement, even when they arrive apart', async () => {
    const { store, statements } = storeWithCounter(300);
    for (let i = 0; i < 20; i++) store.record(row('window'));
    await new Promise((r) => setTimeout(r, 30));
    for (let i = 0; i < 20; i++) store.record(row('window'));
    await waitFor(async () => (await rowsOf('window')).rows === 40);
    expect(statements.count).toBe(1);
    await store.close();
  });

  it('a full batch (500 rows) is written at once, not after the window', async () => {
    const { store, statements } = storeWithCounter(60_000);
    for (let i = 0; i < 501; i++) store.record(row('full'));
    await waitFor(async () => (await rowsOf('full')).rows >= 500, 3_000);
    expect(statements.count).toBeGreaterThanOrEqual(1);
    // the one left over waits for its window; close writes it
    await store.close();
    expect(await rowsOf('full')).toEqual({ rows: 501, tokens: 5010, rollupRequests: 501, rollupTokens: 5010 });
  });

  it('monthly tokens count queued and in-flight rows (a quota is never under-counted)', async () => {
    const { store } = storeWithCounter(60_000);
    store.record(row('quota', 100));
    store.record(row('quota', 50));
    expect(await store.monthlyTokens('quota', NOW)).toBe(150);
    const writing = store.flush(); // the batch is now in flight
    expect(await store.monthlyTokens('quota', NOW)).toBeGreaterThanOrEqual(150);
    await writing;
    expect(await store.monthlyTokens('quota', NOW)).toBe(150);
    expect(await store.monthlyTokens('someone-else', NOW)).toBe(0);
    await store.close();
  });

  it('close() writes everything queued', async () => {
    const { store } = storeWithCounter(60_000);
    for (let i = 0; i < 7; i++) store.record(row('closing'));
    await store.close();
    expect((await rowsOf('closing')).rows).toBe(7);
  });

  it('concurrent recording and flushing loses and duplicates nothing', async () => {
    const { store } = storeWithCounter(5);
    const N = 2_000;
    await Promise.all(
      Array.from({ length: 20 }, async (_, worker) => {
        for (let i = 0; i < N / 20; i++) {
          store.record(row(`race-${worker % 4}`, 2));
          if (i % 17 === 0) await store.flush();
          else if (i % 5 === 0) await new Promise((r) => setImmediate(r));
        }
      }),
    );
    await store.close();
    let total = 0;
    for (let u = 0; u < 4; u++) {
      const s = await rowsOf(`race-${u}`);
      expect(s.rows).toBe(N / 4);
      expect(s).toEqual({ rows: N / 4, tokens: N / 2, rollupRequests: N / 4, rollupTokens: N / 2 });
      total += s.rows;
    }
    expect(total).toBe(N);
  });
});
