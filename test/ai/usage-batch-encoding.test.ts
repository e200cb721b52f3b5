/**
 * The usage batch travels to PostgreSQL as one JSON parameter (src/domains/ai/ai.repo.ts): every
 * field must arrive as it was recorded — ids with quotes, backslashes and non-ASCII, a null agent,
 * an exact decimal cost, the timestamp to the millisecond — in the rows and in both rollups.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { aiRepo, entryOf, type UsageRow } from '../../src/domains/ai/ai.repo.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database?.drop());

it('writes awkward strings, nulls, exact costs and timestamps as recorded, rollups included', async () => {
  const at = new Date('2026-03-31T23:59:59.123Z');
  const user = `u"1\\'é,{}[]`;
  const rows: UsageRow[] = [
    {
      userId: user,
      agentId: null,
      model: 'm/"x"',
      provider: 'router',
      promptTokens: 3,
      completionTokens: 4,
      totalTokens: 7,
      cost: 0.0000012345,
      priced: true,
      billTo: null,
      createdAt: at,
    },
    {
      userId: user,
      agentId: 'agent,"1"',
      model: 'm/"x"',
      provider: 'router',
      promptTokens: 1,
      completionTokens: 2,
      totalTokens: 3,
      cost: 0.1,
      priced: true,
      billTo: null,
      createdAt: at,
    },
  ];
  await aiRepo.insertUsage(database.db.pool, rows.map(entryOf));
  const got = await sql<{ agent_id: string | null; model: string; cost: string; created_at: Date; total_tokens: number }>`
    select agent_id, model, cost::text as cost, created_at, total_tokens from ai_usage where user_id = ${user} order by total_tokens`.execute(
    database.db.kysely,
  );
  expect(got.rows.map((r) => [r.agent_id, r.model, r.cost, r.created_at.toISOString(), r.total_tokens])).toEqual([
    ['agent,"1"', 'm/"x"', '0.1000000000', at.toISOString(), 3],
    [null, 'm/"x"', '0.0000012345', at.toISOString(), 7],
  ]);
  const monthly = await sql<{ month: string; requests: number; total_tokens: number; cost: string }>`
    select month::text as month, requests, total_tokens::int as total_tokens, cost::text as cost from ai_usage_monthly where user_id = ${user}`.execute(
    database.db.kysely,
  );
  expect(monthly.rows).toEqual([{ month: '2026-03-01', requests: 2, total_tokens: 10, cost: '0.1000012345' }]);
  const agent = await sql<{ requests: number; cost: string }>`
    select requests, cost::text as cost from ai_usage_agent_monthly where agent_id = ${'agent,"1"'}`.execute(database.db.kysely);
  expect(agent.rows).toEqual([{ requests: 1, cost: '0.1000000000' }]);
});
