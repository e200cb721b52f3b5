/** SQL of the AI domain (docs/architecture.md rule 1). Usage is written on the owner connection: see migration 007. */
import { type Kysely, sql } from 'kysely';
import type { Pool } from 'pg';
import type { DB } from '../../db/schema.ts';
import type { StoredPlan } from './plan.rules.ts';

/** One call's usage, as the AI layer records it. */
export type UsageRow = {
  userId: string;
  agentId: string | null;
  /** the API key the call was made for (docs/payments.md "API keys"); absent or null: none */
  keyId?: string | null | undefined;
  model: string;
  provider: string;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** USD */
  cost: number;
  /** the model had a price (false: metered at $0 for want of one, migration 220) */
  priced: boolean;
  /** AI_BILLING=balance: the wallet address that pays this call, else null */
  billTo: string | null;
  createdAt: Date;
};

/**
 * What one ai_usage row holds: the calls of one flush window that share caller, agent, model,
 * provider and UTC day, summed (src/domains/ai/usage-store.service.ts; migration 200). `requests` is 1 for a lone call.
 */
export type UsageEntry = {
  userId: string;
  agentId: string | null;
  keyId: string | null;
  model: string;
  provider: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** USD in units of 1e-10 (the column's scale), an integer: each call's cost rounded once, then summed exactly */
  costUnits: number;
  priced: boolean;
  billTo: string | null;
  /** the first call's time */
  createdAt: Date;
};

/** A batch's charge to one wallet (AI_BILLING=balance): the cost of its rows billed to that address, and the journal id that pays it. */
export type UsageCharge = { address: string; costUnits: number; eventId: string };

/** A call's USD cost in the integer units of UsageEntry.costUnits (a cost that is not a finite number ≥ 0 counts 0). */
export const costUnitsOf = (usd: number): number => (usd > 0 && Number.isFinite(usd) ? Math.round(usd * 1e10) : 0);

/** One call as an entry of its own (requests 1). */
export const entryOf = (row: UsageRow): UsageEntry => ({
  userId: row.userId,
  agentId: row.agentId,
  keyId: row.keyId ?? null,
  model: row.model,
  provider: row.provider,
  requests: 1,
  promptTokens: row.promptTokens,
  completionTokens: row.completionTokens,
  totalTokens: row.totalTokens,
  costUnits: costUnitsOf(row.cost),
  priced: row.priced,
  billTo: row.billTo,
  createdAt: row.createdAt,
});

/** Integer 1e-10 USD units as exact decimal text with 10 places (numeric(20, 10)). */
export function unitsToDecimal(units: number): string {
  const s = String(units).padStart(11, '0');
  return `${s.slice(0, -10)}.${s.slice(-10)}`;
}

/** What one model call (or several of one process) may still cost against one cap in one month, in 1e-10 USD units (src/domains/ai/spend-holds.service.ts). */
export type SpendHold = { scope: string; period: string; units: number };

/** One group of usage rows (a day or a model): token sums as numbers, cost as numeric text. */
export type UsageBucket = {
  key: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost: string;
  /** calls of a model that had no price (metered at $0, migration 220) */
  unpriced_requests: number;
};

/** First day of the UTC month of `d`, as `YYYY-MM-01`. */
export const monthOf = (d: Date) => `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}-01`;

/** Adds the rows of `r` with a `column` to its monthly rollup `table` (one statement of INSERT_USAGE). */
const monthlyRollup = (table: string, column: string) => `
        INSERT INTO ${table} AS t (${column}, month, user_id, requests, prompt_tokens, completion_tokens, total_tokens, cost)
        SELECT ${column}, date_trunc('month', created_at AT TIME ZONE 'UTC')::date, min(user_id),
               sum(requests), sum(prompt_tokens), sum(completion_tokens), sum(total_tokens), sum(cost)
        FROM r WHERE ${column} IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (${column}, month) DO UPDATE SET
          requests = t.requests + EXCLUDED.requests,
          prompt_tokens = t.prompt_tokens + EXCLUDED.prompt_tokens,
          completion_tokens = t.completion_tokens + EXCLUDED.completion_tokens,
          total_tokens = t.total_tokens + EXCLUDED.total_tokens,
          cost = t.cost + EXCLUDED.cost`;

/** The usage write (aiRepo.insertUsage): rows, the rollups (user and model, agent, key) and the released holds in one statement. */
const INSERT_USAGE = `
      WITH r AS (
        SELECT * FROM json_to_recordset($1::json)
          AS r(user_id text, agent_id text, key_id uuid, model text, provider text, requests int, prompt_tokens int, completion_tokens int,
               total_tokens int, cost numeric, priced boolean, billing_event text, created_at timestamptz)
      ), ins AS (
        INSERT INTO ai_usage (user_id, agent_id, key_id, model, provider, requests, prompt_tokens, completion_tokens, total_tokens, cost, priced, billing_event, created_at)
        SELECT user_id, agent_id, key_id, model, provider, requests, prompt_tokens, completion_tokens, total_tokens, cost, priced, billing_event, created_at FROM r
      ), apikey AS (${monthlyRollup('ai_usage_key_monthly', 'key_id')}
      ), agent AS (${monthlyRollup('ai_usage_agent_monthly', 'agent_id')}
      ), released AS (
        UPDATE spend_holds h SET reserved = greatest(h.reserved - x.amount, 0)
        FROM (SELECT scope, period, sum(amount) AS amount FROM json_to_recordset($2::json) AS x(scope text, period date, amount numeric)
              GROUP BY 1, 2) x
        WHERE h.scope = x.scope AND h.period = x.period AND h.holder = $3::uuid
      )
      INSERT INTO ai_usage_monthly AS m (user_id, month, model, requests, prompt_tokens, completion_tokens, total_tokens, cost)
      SELECT user_id, date_trunc('month', created_at AT TIME ZONE 'UTC')::date, model,
             sum(requests), sum(prompt_tokens), sum(completion_tokens), sum(total_tokens), sum(cost)
      FROM r GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
      ON CONFLICT (user_id, month, model) DO UPDATE SET
        requests = m.requests + EXCLUDED.requests,
        prompt_tokens = m.prompt_tokens + EXCLUDED.prompt_tokens,
        completion_tokens = m.completion_tokens + EXCLUDED.completion_tokens,
        total_tokens = m.total_tokens + EXCLUDED.total_tokens,
        cost = m.cost + EXCLUDED.cost`;

/** INSERT_USAGE for kysely: its text cut at the `$n` placeholders, the n of each (the billing transaction's statement). */
const INSERT_USAGE_PARTS = INSERT_USAGE.split(/\$(\d)/);
const insertUsageOn = (trx: Kysely<DB>, values: (string | null)[]) => {
  const texts = INSERT_USAGE_PARTS.filter((_, i) => i % 2 === 0);
  const params = INSERT_USAGE_PARTS.filter((_, i) => i % 2 === 1).map((n) => values[Number(n) - 1] ?? null);
  return sql(Object.assign([...texts], { raw: [...texts] }) as unknown as TemplateStringsArray, ...params).execute(trx);
};

export const aiRepo = {
  /**
   * Inserts a batch of usage entries and adds them to the monthly rollups (per user and model, and per
   * agent for the agents' budgets) in one statement, so they can never disagree; the same statement
   * takes away the spend holds of those calls (`releases`, migration 205), so what a cap counts
   * (spent + held) never drops below the truth for a moment. Rows are grouped and ordered before the
   * upsert, so concurrent batches
   * lock rollup rows in the same order (no deadlock). A named prepared statement: PostgreSQL plans
   * it once per connection, and building it costs no query compilation in Node, which matters
   * because it runs beside every AI request (docs/benchmarks.md). The batch travels as one JSON
   * parameter: JSON.stringify is native, where one array per column went through pg's JavaScript
   * array-literal encoder (escapeElement), the largest cost of usage recording in the proxy's CPU
   * profile at concurrency 64. Cost goes as exact decimal text, never a JSON float.
   */
  async insertUsage(
    pool: Pool,
    entries: UsageEntry[],
    releases: SpendHold[] = [],
    holder: string | null = null,
    billingEvent?: (address: string) => string,
    trx?: Kysely<DB>,
  ): Promise<void> {
    if (entries.length === 0 && releases.length === 0) return;
    const batch = entries.map((r) => ({
      user_id: r.userId,
      agent_id: r.agentId,
      key_id: r.keyId,
      model: r.model,
      provider: r.provider,
      requests: r.requests,
      prompt_tokens: r.promptTokens,
      completion_tokens: r.completionTokens,
      total_tokens: r.totalTokens,
      cost: unitsToDecimal(r.costUnits),
      priced: r.priced,
      billing_event: r.billTo && billingEvent ? billingEvent(r.billTo) : null,
      created_at: r.createdAt.toISOString(),
    }));
    const released = releases.map((h) => ({ scope: h.scope, period: h.period, amount: unitsToDecimal(h.units) }));
    const values = [JSON.stringify(batch), released.length > 0 ? JSON.stringify(released) : '[]', holder];
    // in a billing transaction (usage-store.service.ts) the statement runs on its connection
    if (trx) {
      await insertUsageOn(trx, values);
      return;
    }
    await pool.query({ name: 'ai_insert_usage', text: INSERT_USAGE, values });
  },

  /** Tokens used by `userId` in the UTC month containing `at` (from the rollup). */
  async monthlyTokens(db: Kysely<DB>, userId: string, at: Date): Promise<number> {
    const row = await db
      .selectFrom('ai_usage_monthly')
      .select(sql<string>`coalesce(sum(total_tokens), 0)`.as('total'))
      .where('user_id', '=', userId)
      .where('month', '=', monthOf(at))
      .executeTakeFirst();
    return Number(row?.total ?? 0);
  },

  /**
   * One user's usage since `since`, per UTC day, per model, per agent and per API key (GET /api/usage), or one
   * agent's (GET /api/agents/:id/usage, `agentId`). Runs inside withUser: row-level security limits
   * it to the caller's rows (and agent names to the caller's agents), the WHERE only narrows.
   * Cost is summed in numeric and returned as text so no float rounding happens in SQL.
   */
  async usageReport(
    db: Kysely<DB>,
    since: Date,
    agentId?: string,
  ): Promise<{
    daily: UsageBucket[];
    byModel: UsageBucket[];
    byAgent: (UsageBucket & { name: string | null })[];
    byKey: (UsageBucket & { name: string | null })[];
  }> {
    const where = agentId
      ? sql`created_at >= ${since.toISOString()}::timestamptz AND agent_id = ${agentId}`
      : sql`created_at >= ${since.toISOString()}::timestamptz`;
    // a row is one or more calls (migration 200): requests are summed, not counted
    const sums = sql`sum(requests)::int AS requests, sum(prompt_tokens)::bigint AS prompt_tokens,
             sum(completion_tokens)::bigint AS completion_tokens, sum(total_tokens)::bigint AS total_tokens, sum(cost)::text AS cost,
             coalesce(sum(requests) FILTER (WHERE NOT priced), 0)::int AS unpriced_requests`;
    const daily = await sql<UsageBucket>`
      SELECT to_char(date_trunc('day', created_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS key, ${sums}
      FROM ai_usage WHERE ${where} GROUP BY 1 ORDER BY 1`.execute(db);
    const byModel = await sql<UsageBucket>`
      SELECT model AS key, ${sums} FROM ai_usage WHERE ${where} GROUP BY 1 ORDER BY sum(cost) DESC, 1`.execute(db);
    if (agentId) return { daily: daily.rows, byModel: byModel.rows, byAgent: [], byKey: [] };
    // a deleted agent's usage stays (history): its name is then null
    const byAgent = await sql<UsageBucket & { name: string | null }>`
      SELECT u.key, a.name, u.requests, u.prompt_tokens, u.completion_tokens, u.total_tokens, u.cost, u.unpriced_requests FROM (
        SELECT agent_id AS key, ${sums}, sum(cost) AS exact FROM ai_usage WHERE ${where} AND agent_id IS NOT NULL GROUP BY 1
      ) u LEFT JOIN agents a ON a.id = u.key ORDER BY u.exact DESC, u.key`.execute(db);
    // the calls made for an API key (docs/payments.md "API keys"); a deleted key's stay, its name null
    const byKey = await sql<UsageBucket & { name: string | null }>`
      SELECT u.key, k.name, u.requests, u.prompt_tokens, u.completion_tokens, u.total_tokens, u.cost, u.unpriced_requests FROM (
        SELECT key_id::text AS key, ${sums}, sum(cost) AS exact FROM ai_usage WHERE ${where} AND key_id IS NOT NULL GROUP BY 1
      ) u LEFT JOIN api_keys k ON k.id::text = u.key ORDER BY u.exact DESC, u.key`.execute(db);
    return { daily: daily.rows, byModel: byModel.rows, byAgent: byAgent.rows, byKey: byKey.rows };
  },

  /** A platform user's plan, subscription status and admin right (the AI plan middleware). */
  async storedPlan(db: Kysely<DB>, userId: string): Promise<StoredPlan | null> {
    const row = await db
      .selectFrom('users')
      .select(['plan', 'subscription_status', 'is_admin', 'email', 'email_verified', 'password_predates_verification'])
      .where('id', '=', userId)
      .executeTakeFirst();
    return row
      ? {
          plan: row.plan,
          subscriptionStatus: row.subscription_status,
          isAdmin: row.is_admin,
          email: row.email,
          emailVerified: row.email_verified,
          passwordPredatesVerification: row.password_predates_verification,
        }
      : null;
  },

  async ping(db: Kysely<DB>): Promise<void> {
    await sql`SELECT 1`.execute(db);
  },
};
