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

const row = (userId: string, model: string, daysAgo: number, tokens: number, cost: number) =>
  entryOf({
    userId,
    agentId: null,
    model,
    provider: 'router',
    promptTokens: tokens / 2,
    completionTokens: tokens / 2,
    totalTokens: tokens,
    cost,
    priced: true,
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
    });
    expect(body.daily[4]).toMatchObject({ date: '2026-11-22', requests: 1, totalTokens: 1000, cost: 0.05 });
    expect(body.daily[0]).toEqual({ date: '2026-11-18', requests: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0, cost: 0 });
    expect(body.totals).toEqual({ requests: 3, promptTokens: 575, completionTokens: 575, totalTokens: 1150, cost: 0.0545 });
    expect(body.byModel).toEqual([
      { model: 'claude-opus-4-6', requests: 1, promptTokens: 500, completionTokens: 500, totalTokens: 1000, cost: 0.05 },
      { model: 'gpt-4', requests: 2, promptTokens: 75, completionTokens: 75, totalTokens: 150, cost: 0.0045 },
    ]);
    // the default period is 30 days and still excludes the 40-day-old row
    const d30 = (await t.web.inject({ method: 'GET', url: '/api/usage', headers: { cookie: me.cookie } })).json();
    expect(d30.days).toBe(30);
    expect(d30.daily).toHaveLength(30);
    expect(d30.totals.requests).toBe(3);
  });

  it('a new user sees zeros, not an error', async () => {
    const me = await signUp(t.web);
    const body = (await t.web.inject({ method: 'GET', url: '/api/usage?days=1', headers: { cookie: me.cookie } })).json();
    expect(body.totals).toEqual({ requests: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0, cost: 0 });
    expect(body.daily).toEqual([{ date: '2026-11-24', requests: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0, cost: 0 }]);
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
