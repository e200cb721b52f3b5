/**
 * SQL of spend alerts (migration 225). A user's own alerts are read and written under their
 * row-level security (`Tx`); the worker's claim, which compares every armed alert with a balance
 * or a month's spend, runs on the owner connection (`Kysely<DB>`), like the other job queues.
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';

export type AlertRow = {
  id: string;
  kind: 'balance' | 'budget';
  agent_id: string | null;
  threshold_usd: string;
  webhook_url: string | null;
  state: 'armed' | 'sending' | 'fired';
  fired_at: Date | null;
  fired_value_usd: string | null;
};

/** A crossed alert a worker holds: what to tell, and to whom. */
export type DueAlert = {
  id: string;
  user_id: string;
  email: string;
  kind: 'balance' | 'budget';
  agent_id: string | null;
  agent_name: string | null;
  threshold_usd: string;
  webhook_url: string | null;
  /** the balance (USD) or the agent's month-to-date spend (USD) that crossed the threshold */
  value_usd: string;
  attempts: number;
};

const COLUMNS = ['id', 'kind', 'agent_id', 'threshold_usd', 'webhook_url', 'state', 'fired_at', 'fired_value_usd'] as const;

export const spendAlertsRepo = {
  list(trx: Tx): Promise<AlertRow[]> {
    return trx.selectFrom('spend_alerts').select(COLUMNS).orderBy('kind').orderBy('created_at').execute() as Promise<AlertRow[]>;
  },

  /** Sets (or replaces) the user's balance alert or an agent's budget alert; a new threshold arms it again. */
  async upsert(
    trx: Tx,
    a: { userId: string; kind: 'balance' | 'budget'; agentId: string | null; thresholdUsd: number; webhookUrl: string | null },
  ) {
    const values = { threshold_usd: a.thresholdUsd.toFixed(6), webhook_url: a.webhookUrl };
    const rearm = {
      ...values,
      state: 'armed' as const,
      fired_at: null,
      fired_value_usd: null,
      period: null,
      attempts: 0,
      lease_until: null,
      holder: null,
      updated_at: sql<Date>`now()`,
    };
    await trx
      .insertInto('spend_alerts')
      .values({ user_id: a.userId, kind: a.kind, agent_id: a.agentId, ...values })
      .onConflict((oc) =>
        (a.kind === 'balance'
          ? oc.column('user_id').where('kind', '=', 'balance')
          : oc.column('agent_id').where('kind', '=', 'budget')
        ).doUpdateSet(rearm),
      )
      .execute();
  },

  async remove(trx: Tx, kind: 'balance' | 'budget', agentId: string | null): Promise<boolean> {
    let q = trx.deleteFrom('spend_alerts').where('kind', '=', kind);
    if (agentId) q = q.where('agent_id', '=', agentId);
    const r = await q.executeTakeFirst();
    return r.numDeletedRows > 0n;
  },

  /** The caller's agent (row-level security: another user's agent is not found). */
  async ownedAgent(trx: Tx, agentId: string): Promise<boolean> {
    return (await trx.selectFrom('agents').select('id').where('id', '=', agentId).executeTakeFirst()) !== undefined;
  },

  /**
   * Owner connection (the worker serves every user). Arms again the fired alerts whose crossing
   * has passed (the balance is back at or above the threshold; a budget alert's month is over),
   * then claims up to `limit` armed alerts whose value has crossed, leased to `holder`.
   * The value is read in the same statement as the claim: a balance from the ledger's
   * wallet_balances, an agent's spend from its monthly rollup.
   */
  async claim(db: Kysely<DB>, holder: string, leaseMs: number, limit: number): Promise<DueAlert[]> {
    await sql`
      UPDATE spend_alerts a SET state = 'armed', fired_at = NULL, fired_value_usd = NULL, period = NULL, attempts = 0,
             lease_until = NULL, updated_at = now()
       WHERE a.state = 'fired' AND (
         (a.kind = 'balance' AND coalesce((SELECT w.balance_micros FROM session_wallets s JOIN wallet_balances w ON w.address = lower(s.address)
                                            WHERE s.user_id = a.user_id), 0) >= a.threshold_usd * 1000000)
         OR (a.kind = 'budget' AND a.period < date_trunc('month', now() AT TIME ZONE 'UTC')::date))`.execute(db);
    const r = await sql<DueAlert>`
      WITH valued AS (
        SELECT a.id,
               CASE WHEN a.kind = 'balance'
                 THEN coalesce((SELECT w.balance_micros FROM session_wallets s JOIN wallet_balances w ON w.address = lower(s.address)
                                 WHERE s.user_id = a.user_id), 0)::numeric / 1000000
                 ELSE coalesce((SELECT m.cost FROM ai_usage_agent_monthly m
                                 WHERE m.agent_id = a.agent_id AND m.month = date_trunc('month', now() AT TIME ZONE 'UTC')::date), 0)
               END AS value_usd
          FROM spend_alerts a
         WHERE (a.state = 'armed' AND (a.lease_until IS NULL OR a.lease_until < now()))
            OR (a.state = 'sending' AND a.lease_until < now())
      ), due AS (
        SELECT a.id, v.value_usd FROM spend_alerts a JOIN valued v ON v.id = a.id
         WHERE (a.kind = 'balance' AND v.value_usd < a.threshold_usd) OR (a.kind = 'budget' AND v.value_usd >= a.threshold_usd)
         ORDER BY a.id
         FOR UPDATE OF a SKIP LOCKED
         LIMIT ${limit}
      )
      UPDATE spend_alerts a SET state = 'sending', holder = ${holder}, attempts = a.attempts + 1,
             lease_until = now() + make_interval(secs => ${leaseMs / 1000}), updated_at = now()
        FROM due, users u
       WHERE a.id = due.id AND u.id = a.user_id
      RETURNING a.id, a.user_id, u.email, a.kind, a.agent_id, (SELECT g.name FROM agents g WHERE g.id = a.agent_id) AS agent_name,
                a.threshold_usd::text AS threshold_usd, a.webhook_url, due.value_usd::text AS value_usd, a.attempts`.execute(db);
    return r.rows;
  },

  /** Records a delivery the worker still holds: told (fired), or due again after `retryInMs`. False when it lost the lease. */
  async finish(
    db: Kysely<DB>,
    id: string,
    holder: string,
    o: { told: true; valueUsd: string } | { told: false; retryInMs: number; error: string },
  ) {
    const r = o.told
      ? await sql`UPDATE spend_alerts SET state = 'fired', fired_at = now(), fired_value_usd = ${o.valueUsd}::numeric,
                    period = date_trunc('month', now() AT TIME ZONE 'UTC')::date, holder = NULL, lease_until = NULL, last_error = NULL, updated_at = now()
                   WHERE id = ${id} AND holder = ${holder} AND state = 'sending'`.execute(db)
      : await sql`UPDATE spend_alerts SET state = 'armed', holder = NULL, last_error = ${o.error.slice(0, 500)},
                    lease_until = now() + make_interval(secs => ${o.retryInMs / 1000}), updated_at = now()
                   WHERE id = ${id} AND holder = ${holder} AND state = 'sending'`.execute(db);
    return Number(r.numAffectedRows ?? 0) > 0;
  },
};
