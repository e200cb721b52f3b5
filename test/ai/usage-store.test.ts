/**
 * The AI usage store (src/domains/ai/usage-store.service.ts), against a real PostgreSQL: calls are written within
 * the flush window without anyone asking, calls of one window share one statement, and those with
 * the same caller, agent, model, provider and UTC day one row (migration 200) with exact sums, a
 * call arriving during a write waits for its own window, a full batch does not wait for the window,
 * quotas see queued and in-flight calls, and nothing is lost or written twice when recording and
 * flushing race (batching must keep the counts).
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageRow } from '../../src/domains/ai/ai.repo.ts';
import { createUsageStore } from '../../src/domains/ai/usage-store.service.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database?.drop());

const NOW = new Date();
const row = (userId: string, tokens = 10, model = 'openai/gpt-4o-mini'): UsageRow => ({
  userId,
  agentId: null,
  model,
  provider: 'router',
  promptTokens: tokens / 2,
  completionTokens: tokens / 2,
  totalTokens: tokens,
  cost: tokens * 1e-6,
  priced: true,
  billTo: null,
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
  const r = await sql<{ n: number; requests: number; tokens: number }>`
    select count(*)::int as n, coalesce(sum(requests), 0)::int as requests, coalesce(sum(total_tokens), 0)::int as tokens
      from ai_usage where user_id = ${userId}`.execute(database.db.kysely);
  const m = await sql<{ requests: number; tokens: number }>`
    select coalesce(sum(requests), 0)::int as requests, coalesce(sum(total_tokens), 0)::int as tokens
      from ai_usage_monthly where user_id = ${userId}`.execute(database.db.kysely);
  const x = r.rows[0]!;
  return { rows: x.n, requests: x.requests, tokens: x.tokens, rollupRequests: m.rows[0]!.requests, rollupTokens: m.rows[0]!.tokens };
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
    expect(await rowsOf('lone')).toEqual({ rows: 1, requests: 1, tokens: 10, rollupRequests: 1, rollupTokens: 10 });
    await store.close();
  });

  it('calls of one window share one statement, even when they arrive apart, and one row when alike', async () => {
    const { store, statements } = storeWithCounter(300);
    for (let i = 0; i < 20; i++) store.record(row('window'));
    await new Promise((r) => setTimeout(r, 30));
    for (let i = 0; i < 20; i++) store.record(row('window'));
    store.record(row('window', 10, 'openai/gpt-4o'));
    await waitFor(async () => (await rowsOf('window')).requests === 41);
    expect(statements.count).toBe(1);
    expect(await rowsOf('window')).toEqual({ rows: 2, requests: 41, tokens: 410, rollupRequests: 41, rollupTokens: 410 });
    await store.close();
  });

  it('a row sums only calls of the same caller, agent, model, provider and UTC day, exactly', async () => {
    const { store } = storeWithCounter(60_000);
    const at = new Date('2026-11-20T23:59:59.990Z');
    const nextDay = new Date('2026-11-21T00:00:00.005Z');
    const call = (over: Partial<UsageRow>): UsageRow => ({ ...row('sums'), createdAt: at, ...over });
    // 0.1 + 0.2 is 0.30000000000000004 in floats; the row must say 0.3 exactly
    store.record(call({ agentId: 'sums-a1', cost: 0.1, promptTokens: 1, completionTokens: 2, totalTokens: 3 }));
    store.record(call({ agentId: 'sums-a1', cost: 0.2, promptTokens: 4, completionTokens: 5, totalTokens: 9 }));
    store.record(call({ agentId: 'sums-a1', cost: 0.00000000004, promptTokens: 0, completionTokens: 0, totalTokens: 0 })); // rounds to 0
    store.record(call({ agentId: 'sums-a2', cost: 0.5 }));
    store.record(call({ agentId: 'sums-a1', model: 'other/model', cost: 0.5 }));
    store.record(call({ agentId: 'sums-a1', provider: 'openai', cost: 0.5 }));
    store.record(call({ agentId: null, cost: 0.5 }));
    store.record(call({ agentId: 'sums-a1', cost: 0.7, createdAt: nextDay }));
    store.record({ ...call({ agentId: 'sums-a1', cost: 0.5 }), userId: 'sums-other' });
    await store.close();
    const got = await sql<{
      user_id: string;
      agent_id: string | null;
      model: string;
      provider: string;
      requests: number;
      tokens: number;
      cost: string;
      created_at: Date;
    }>`
      select user_id, agent_id, model, provider, requests, total_tokens as tokens, cost::text as cost, created_at
        from ai_usage where user_id in ('sums', 'sums-other') order by user_id, agent_id nulls first, model, provider, created_at`.execute(
      database.db.kysely,
    );
    expect(
      got.rows.map((r) => [r.user_id, r.agent_id, r.model, r.provider, r.requests, r.tokens, r.cost, r.created_at.toISOString()]),
    ).toEqual([
      ['sums', null, 'openai/gpt-4o-mini', 'router', 1, 10, '0.5000000000', at.toISOString()],
      ['sums', 'sums-a1', 'openai/gpt-4o-mini', 'openai', 1, 10, '0.5000000000', at.toISOString()],
      ['sums', 'sums-a1', 'openai/gpt-4o-mini', 'router', 3, 12, '0.3000000000', at.toISOString()], // the first call's time
      ['sums', 'sums-a1', 'openai/gpt-4o-mini', 'router', 1, 10, '0.7000000000', nextDay.toISOString()],
      ['sums', 'sums-a1', 'other/model', 'router', 1, 10, '0.5000000000', at.toISOString()],
      ['sums', 'sums-a2', 'openai/gpt-4o-mini', 'router', 1, 10, '0.5000000000', at.toISOString()],
      ['sums-other', 'sums-a1', 'openai/gpt-4o-mini', 'router', 1, 10, '0.5000000000', at.toISOString()],
    ]);
    const agent = await sql<{ requests: number; cost: string }>`
      select requests::int as requests, cost::text as cost from ai_usage_agent_monthly where agent_id = 'sums-a1' and month = '2026-11-01'`.execute(
      database.db.kysely,
    );
    expect(agent.rows).toEqual([{ requests: 7, cost: '2.5000000000' }]);
  });

  it('a call that arrives while a batch is written waits for its own window', async () => {
    // until round 5 (docs/benchmarks.md "AI proxy") calls that arrived during a write were written
    // straight after it, so under steady load a statement was always in flight with a few calls each
    const { store, statements } = storeWithCounter(100);
    const until = Date.now() + 450;
    let calls = 0;
    while (Date.now() < until) {
      store.record(row('steady', 2));
      calls += 1;
      await new Promise((r) => setTimeout(r, 1));
    }
    await store.close();
    // ~450 ms of calls in 100 ms windows, and close() writing the last: 6 statements, a few more on a slow machine
    expect(statements.count).toBeLessThanOrEqual(9);
    expect(await rowsOf('steady')).toMatchObject({ requests: calls, tokens: 2 * calls, rollupRequests: calls, rollupTokens: 2 * calls });
  });

  it('a full batch (500 entries) is written at once, not after the window', async () => {
    const { store, statements } = storeWithCounter(60_000);
    for (let i = 0; i < 501; i++) store.record(row('full', 10, `model-${i}`));
    await waitFor(async () => (await rowsOf('full')).rows >= 500, 3_000);
    expect(statements.count).toBeGreaterThanOrEqual(1);
    // the one left over waits for its window; close writes it
    await store.close();
    expect(await rowsOf('full')).toEqual({ rows: 501, requests: 501, tokens: 5010, rollupRequests: 501, rollupTokens: 5010 });
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
    expect(await rowsOf('closing')).toMatchObject({ rows: 1, requests: 7 });
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
      expect(s).toMatchObject({ requests: N / 4, tokens: N / 2, rollupRequests: N / 4, rollupTokens: N / 2 });
      total += s.requests;
    }
    expect(total).toBe(N);
  });
});
