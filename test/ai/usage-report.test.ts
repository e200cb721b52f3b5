/**
 * GET /api/usage: the signed-in user's AI usage and cost (ours; §4.9 logs usage per user and
 * model). Only the caller's rows (row-level security), every day of the period present, totals
 * equal to the sum of the rows, bad `days` a 400, no session a 401.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aiRepo, entryOf } from '../../src/domains/ai/ai.repo.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const NOW = new Date('2026-11-24T12:00:00Z');
let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform({ REGISTER_RATE_LIMIT: '1000' }, { now: () => NOW });
});
afterAll(() => t?.close());

const row = (userId: string, model: string, daysAgo: number, tokens: number, cost: number, priced = true) =>
  entryOf({
    userId,
    agentId: null,
    model,
    provider: 'router',
    promptTokens: tokens / 2,
    completionTokens: tokens / 2,
    totalTokens: tokens,
    cost,
    priced,
    billTo: null,
    createdAt: new Date(NOW.getTime() - daysAgo * 86_400_000),
  });

describe('GET /api/usage', () => {
  it('reports only my rows: totals, one entry per day (zeros included), per model by cost', async () => {
    const me = await signUp(t.web);
    const other = await signUp(t.web);
    await aiRepo.insertUsage(t.database.db.pool, [
      row(me.id, 'gpt-4', 0, 100, 0.003),
      row(me.id, 'gpt-4', 0, 50, 0.0015),
      row(me.id, 'claude-opus-4-6', 2, 1000, 0.05),
      row(me.id, 'gpt-4', 40, 10, 1), // outside 30 days
      row(other.id, 'gpt-4', 0, 998, 9),
    ]);
    const res = await t.web.inject({ method: 'GET', url: '/api/usage?days=7', headers: { cookie: me.cookie } });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.days).toBe(7);
    expect(body.from).toBe('2026-11-18');
    expect(body.to).toBe('2026-11-24');
    expect(body.daily).toHaveLength(7);
    expect(body.daily.map((d: { date: string }) => d.date)).toEqual([
      '2026-11-18',
      '2026-11-19',
      '2026-11-20',
      '2026-11-21',
      '2026-11-22',
      '2026-11-23',
      '2026-11-24',
    ]);
    expect(body.daily[6]).toEqual({
      date: '2026-11-24',
      requests: 2,
      promptTokens: 75,
      completionTokens: 75,
      totalTokens: 150,
      cost: 0.0045,
      unpricedRequests: 0,
    });
    expect(body.daily[4]).toMatchObject({ date: '2026-11-22', requests: 1, totalTokens: 1000, cost: 0.05 });
    expect(body.daily[0]).toEqual({
      date: '2026-11-18',
      requests: 0,
      promptTokens: 0,
      completionTokens: 0,
      totalTokens: 0,
      cost: 0,
      unpricedRequests: 0,
    });
    expect(body.totals).toEqual({
      requests: 3,
      promptTokens: 575,
      completionTokens: 575,
      totalTokens: 1150,
      cost: 0.0545,
      unpricedRequests: 0,
    });
    expect(body.byModel).toEqual([
      {
        model: 'claude-opus-4-6',
        requests: 1,
        promptTokens: 500,
        completionTokens: 500,
        totalTokens: 1000,
        cost: 0.05,
        unpricedRequests: 0,
        priced: true,
      },
      {
        model: 'gpt-4',
        requests: 2,
        promptTokens: 75,
        completionTokens: 75,
        totalTokens: 150,
        cost: 0.0045,
        unpricedRequests: 0,
        priced: true,
      },
    ]);
    // the default period is 30 days and still excludes the 40-day-old row
    const d30 = (await t.web.inject({ method: 'GET', url: '/api/usage', headers: { cookie: me.cookie } })).json();
    expect(d30.days).toBe(30);
    expect(d30.daily).toHaveLength(30);
    expect(d30.totals.requests).toBe(3);
  });

  it('calls of a model nobody priced are counted as unpriced (never as $0.00): priced false on their model', async () => {
    const me = await signUp(t.web);
    await aiRepo.insertUsage(t.database.db.pool, [
      row(me.id, 'custom/house-model', 0, 100, 0, false),
      row(me.id, 'custom/house-model', 1, 100, 0, false),
      row(me.id, 'gpt-4', 0, 100, 0.003),
      // priced since (the admin page): one model with priced and unpriced calls
      row(me.id, 'router/mixed', 0, 10, 0.001),
      row(me.id, 'router/mixed', 1, 10, 0, false),
    ]);
    const body = (await t.web.inject({ method: 'GET', url: '/api/usage?days=7', headers: { cookie: me.cookie } })).json();
    const of = (model: string) => body.byModel.find((m: { model: string }) => m.model === model);
    expect(of('custom/house-model')).toMatchObject({ requests: 2, cost: 0, unpricedRequests: 2, priced: false });
    expect(of('router/mixed')).toMatchObject({ requests: 2, cost: 0.001, unpricedRequests: 1, priced: false });
    expect(of('gpt-4')).toMatchObject({ requests: 1, unpricedRequests: 0, priced: true });
    expect(body.totals).toMatchObject({ requests: 5, cost: 0.004, unpricedRequests: 3 });
    expect(body.daily[6]).toMatchObject({ requests: 3, unpricedRequests: 1 });
    expect(body.daily[5]).toMatchObject({ requests: 2, unpricedRequests: 2 });
  });

  it('a new user sees zeros, not an error', async () => {
    const me = await signUp(t.web);
    const body = (await t.web.inject({ method: 'GET', url: '/api/usage?days=1', headers: { cookie: me.cookie } })).json();
    expect(body.totals).toEqual({ requests: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0, cost: 0, unpricedRequests: 0 });
    expect(body.daily).toEqual([
      { date: '2026-11-24', requests: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0, cost: 0, unpricedRequests: 0 },
    ]);
    expect(body.byModel).toEqual([]);
  });

  it.each(['0', '91', '1.5', 'abc', '-3'])('days=%s → 400 with a readable error', async (days) => {
    const me = await signUp(t.web);
    const res = await t.web.inject({ method: 'GET', url: `/api/usage?days=${days}`, headers: { cookie: me.cookie } });
    expect(res.statusCode).toBe(400);
    expect(typeof res.json().error).toBe('string');
  });

  it('no session → 401 before the query is read', async () => {
    const res = await t.web.inject({ method: 'GET', url: '/api/usage?days=abc' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });
});
