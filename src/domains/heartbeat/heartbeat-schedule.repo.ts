/**
 * SQL of the heartbeat schedule (§4.12; migration 051): the worker's queries on the owner
 * connection (scheduling is system work across users). A due heartbeat is taken with
 * FOR UPDATE SKIP LOCKED and leased; finishing is fenced by `locked_by`, and moves the schedule
 * only when nobody re-saved the settings meanwhile.
 */
import { type Kysely, sql } from 'kysely';
import type { DB } from '../../db/schema.ts';

export type DueHeartbeat = {
  user_id: string;
  agent_id: string;
  frequency: string;
  next_heartbeat: Date;
  gateway_url: string | null;
  agent_status: string | null;
};

const secs = (ms: number) => ms / 1000;

export const heartbeatScheduleRepo = {
  /** Takes up to `limit` enabled heartbeats that are due and not leased (or whose lease ran out). */
  async claimDue(db: Kysely<DB>, holder: string, leaseMs: number, limit: number): Promise<DueHeartbeat[]> {
    const r = await sql<DueHeartbeat>`
      WITH taken AS (
        UPDATE heartbeat_settings h
           SET locked_by = ${holder}, lease_until = now() + make_interval(secs => ${secs(leaseMs)})
         WHERE (h.user_id, h.agent_id) IN (
           SELECT user_id, agent_id FROM heartbeat_settings
            WHERE enabled AND next_heartbeat <= now() AND (lease_until IS NULL OR lease_until < now())
            ORDER BY next_heartbeat
            LIMIT ${limit}
            FOR UPDATE SKIP LOCKED)
        RETURNING h.user_id, h.agent_id, h.frequency, h.next_heartbeat)
      SELECT t.user_id, t.agent_id, t.frequency, t.next_heartbeat, a.gateway_url, a.status AS agent_status
        FROM taken t
        LEFT JOIN agents a ON a.id = t.agent_id AND a.user_id = t.user_id`.execute(db);
    return r.rows;
  },

  /**
   * Records a run this holder still leases: `last_heartbeat` is the run time; the next one is the
   * claimed time plus the frequency (no drift), or now plus the frequency when that is already
   * past (a long outage does not replay every missed heartbeat). A schedule the user re-saved
   * meanwhile (another `next_heartbeat`) keeps the user's.
   */
  async finish(
    db: Kysely<DB>,
    holder: string,
    h: Pick<DueHeartbeat, 'user_id' | 'agent_id' | 'next_heartbeat'>,
    outcome: { status: 'ok' | 'failed' | 'skipped'; error: string | null; frequencyMs: number; ran: boolean },
  ): Promise<boolean> {
    const f = secs(outcome.frequencyMs);
    const r = await sql`
      UPDATE heartbeat_settings
         SET last_heartbeat = CASE WHEN ${outcome.ran} THEN now() ELSE last_heartbeat END,
             next_heartbeat = CASE
               -- (within a millisecond: JavaScript dates hold milliseconds, PostgreSQL keeps microseconds)
               WHEN next_heartbeat IS NULL OR abs(extract(epoch FROM next_heartbeat - ${h.next_heartbeat}::timestamptz)) >= 0.001 THEN next_heartbeat
               WHEN next_heartbeat + make_interval(secs => ${f}) > now() THEN next_heartbeat + make_interval(secs => ${f})
               ELSE now() + make_interval(secs => ${f}) END,
             last_run_status = ${outcome.status},
             last_run_error = ${outcome.error === null ? null : outcome.error.slice(0, 2000)},
             runs = runs + CASE WHEN ${outcome.ran} THEN 1 ELSE 0 END,
             locked_by = NULL, lease_until = NULL
       WHERE user_id = ${h.user_id} AND agent_id = ${h.agent_id} AND locked_by = ${holder}`.execute(db);
    return Number(r.numAffectedRows ?? 0) > 0;
  },

  /** Gives a taken heartbeat back unrun (its worker is stopping): due at once for any holder. */
  async release(db: Kysely<DB>, holder: string, h: Pick<DueHeartbeat, 'user_id' | 'agent_id'>): Promise<boolean> {
    const r = await sql`
      UPDATE heartbeat_settings SET locked_by = NULL, lease_until = NULL
       WHERE user_id = ${h.user_id} AND agent_id = ${h.agent_id} AND locked_by = ${holder}`.execute(db);
    return Number(r.numAffectedRows ?? 0) > 0;
  },
};
