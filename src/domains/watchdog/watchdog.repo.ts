/**
 * SQL of the watchdog (migration 050). The worker's queries run on the owner connection
 * (`db.kysely`): watching is system work across users by design. The owner's views (`current`,
 * `history`) run inside `db.withUser`, so row-level security limits them to the caller's agents.
 *
 * Ownership of an agent is a lease on its `agent_watchdog` row: `adopt` takes rows whose lease
 * ran out, `renew` extends the holder's leases, and every write of a check (`applyCheck`) is
 * fenced by `locked_by`, so a process that lost an agent cannot write over the new holder.
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';
import type { WatchdogEventKind, WatchdogState } from './watchdog.types.ts';

type Conn = Kysely<DB> | Tx;

const secs = (ms: number) => ms / 1000;

/** A row the holder checks: the watchdog state plus what it needs of the agent. */
export type DueAgent = {
  agent_id: string;
  user_id: string;
  state: WatchdogState;
  failures: number;
  repair_attempts: number;
  gateway_url: string | null;
};

export type NewEvent = {
  kind: WatchdogEventKind;
  from?: WatchdogState | null;
  to?: WatchdogState | null;
  attempt?: number;
  ok?: boolean;
  detail?: string;
  /** §6: this event is notified on every configured channel */
  notify?: boolean;
};

export type CheckPatch = {
  state: WatchdogState;
  failures: number;
  repairAttempts: number;
  nextCheckInMs: number;
  healthy?: boolean;
  error?: string | null;
  stateChanged?: boolean;
};

export type PendingNotification = {
  id: number;
  event_id: number;
  channel: 'telegram' | 'webhook';
  attempts: number;
  payload: Record<string, unknown>;
};

export const watchdogRepo = {
  /**
   * Brings the watched set in line with the agents table: an agent that should run (status
   * `running`) gets a row in `starting`; one that should not (stopped, suspended, error, …) goes
   * to `stopped` and loses its lease; a stopped one that runs again starts over. Transitions are
   * written to the history in the same statement. Returns how many rows changed.
   */
  async sync(db: Kysely<DB>, holder: string): Promise<number> {
    const added = await sql`
      WITH added AS (
        INSERT INTO agent_watchdog (agent_id, user_id)
        SELECT a.id, a.user_id FROM agents a
         WHERE a.status = 'running' AND NOT EXISTS (SELECT 1 FROM agent_watchdog w WHERE w.agent_id = a.id)
        ON CONFLICT (agent_id) DO NOTHING
        RETURNING agent_id, user_id)
      INSERT INTO agent_watchdog_events (agent_id, user_id, kind, from_state, to_state, detail, holder)
      SELECT agent_id, user_id, 'transition', NULL, 'starting', 'agent is running: watched from now on', ${holder} FROM added`.execute(db);
    const stopped = await sql`
      WITH s AS (
        SELECT w.agent_id, w.state AS old_state FROM agent_watchdog w JOIN agents a ON a.id = w.agent_id
         WHERE a.status NOT IN ('running', 'provisioning') AND w.state <> 'stopped'
         FOR UPDATE OF w SKIP LOCKED),
      changed AS (
        UPDATE agent_watchdog w
           SET state = 'stopped', failures = 0, repair_attempts = 0, state_changed_at = now(), updated_at = now(),
               locked_by = NULL, lease_until = NULL
          FROM s WHERE w.agent_id = s.agent_id
        RETURNING w.agent_id, w.user_id, s.old_state)
      INSERT INTO agent_watchdog_events (agent_id, user_id, kind, from_state, to_state, detail, holder)
      SELECT agent_id, user_id, 'transition', old_state, 'stopped', 'agent is not meant to run', ${holder} FROM changed`.execute(db);
    const restarted = await sql`
      WITH s AS (
        SELECT w.agent_id FROM agent_watchdog w JOIN agents a ON a.id = w.agent_id
         WHERE a.status = 'running' AND w.state = 'stopped'
         FOR UPDATE OF w SKIP LOCKED),
      changed AS (
        UPDATE agent_watchdog w
           SET state = 'starting', failures = 0, repair_attempts = 0, next_check_at = now(), state_changed_at = now(), updated_at = now()
          FROM s WHERE w.agent_id = s.agent_id
        RETURNING w.agent_id, w.user_id)
      INSERT INTO agent_watchdog_events (agent_id, user_id, kind, from_state, to_state, detail, holder)
      SELECT agent_id, user_id, 'transition', 'stopped', 'starting', 'agent is running again', ${holder} FROM changed`.execute(db);
    return Number(added.numAffectedRows ?? 0) + Number(stopped.numAffectedRows ?? 0) + Number(restarted.numAffectedRows ?? 0);
  },

  /** Takes over up to `limit` watched agents nobody holds (new, released, or whose holder died). */
  async adopt(db: Kysely<DB>, holder: string, leaseMs: number, limit: number): Promise<string[]> {
    const r = await sql<{ agent_id: string }>`
      UPDATE agent_watchdog w
         SET locked_by = ${holder}, lease_until = now() + make_interval(secs => ${secs(leaseMs)})
       WHERE w.agent_id IN (
         SELECT agent_id FROM agent_watchdog
          WHERE state <> 'stopped' AND (lease_until IS NULL OR lease_until < now())
          ORDER BY next_check_at
          LIMIT ${limit}
          FOR UPDATE SKIP LOCKED)
      RETURNING w.agent_id`.execute(db);
    return r.rows.map((x) => x.agent_id);
  },

  /** Extends every lease this holder has; returns how many it still holds. */
  async renew(db: Kysely<DB>, holder: string, leaseMs: number): Promise<number> {
    const r = await sql`
      UPDATE agent_watchdog SET lease_until = now() + make_interval(secs => ${secs(leaseMs)})
       WHERE locked_by = ${holder} AND lease_until >= now()`.execute(db);
    return Number(r.numAffectedRows ?? 0);
  },

  /** Gives this holder's agents back (graceful shutdown), so another backend takes them at once. */
  async release(db: Kysely<DB>, holder: string): Promise<void> {
    await sql`UPDATE agent_watchdog SET locked_by = NULL, lease_until = NULL WHERE locked_by = ${holder}`.execute(db);
  },

  /** This holder's agents whose check is due, whose lease is live and which are meant to run now. */
  async due(db: Kysely<DB>, holder: string, limit: number, skip: string[]): Promise<DueAgent[]> {
    const r = await sql<DueAgent>`
      SELECT w.agent_id, w.user_id, w.state, w.failures, w.repair_attempts, a.gateway_url
        FROM agent_watchdog w JOIN agents a ON a.id = w.agent_id
       WHERE w.locked_by = ${holder} AND w.lease_until >= now() AND w.next_check_at <= now()
         AND w.state <> 'stopped' AND a.status = 'running'
         AND NOT (w.agent_id = ANY(${skip}::text[]))
       ORDER BY w.next_check_at
       LIMIT ${limit}`.execute(db);
    return r.rows;
  },

  /**
   * Makes an agent that is believed up (`starting`, `running`) due now, whoever holds it: its
   * process exited, or a call to it failed. Agents already checked at the degraded interval, in a
   * crash loop or stopped are left alone. True when it was moved.
   */
  async checkNow(db: Kysely<DB>, agentId: string): Promise<boolean> {
    const r = await sql`
      UPDATE agent_watchdog SET next_check_at = now()
       WHERE agent_id = ${agentId} AND state IN ('starting', 'running') AND next_check_at > now()`.execute(db);
    return Number(r.numAffectedRows ?? 0) > 0;
  },

  /** Pushes the next check of an agent this holder has (e.g. while a repair runs). */
  async postpone(db: Kysely<DB>, holder: string, agentId: string, ms: number): Promise<boolean> {
    const r = await sql`
      UPDATE agent_watchdog SET next_check_at = now() + make_interval(secs => ${secs(ms)})
       WHERE agent_id = ${agentId} AND locked_by = ${holder}`.execute(db);
    return Number(r.numAffectedRows ?? 0) > 0;
  },

  /**
   * Writes the outcome of a check: the new state and counters, its history rows and their
   * notifications, in one transaction fenced by `locked_by`. Returns false (and writes nothing)
   * when this holder no longer has the agent.
   */
  async applyCheck(
    db: Kysely<DB>,
    holder: string,
    agent: { agent_id: string; user_id: string },
    patch: CheckPatch,
    events: NewEvent[],
    channels: ('telegram' | 'webhook')[],
    payloadOf: (e: NewEvent, at: Date) => Record<string, unknown>,
  ): Promise<boolean> {
    return db.transaction().execute(async (trx) => {
      const r = await sql`
        UPDATE agent_watchdog
           SET state = ${patch.state}, failures = ${patch.failures}, repair_attempts = ${patch.repairAttempts},
               next_check_at = now() + make_interval(secs => ${secs(patch.nextCheckInMs)}),
               last_check_at = now(),
               last_healthy_at = CASE WHEN ${patch.healthy === true} THEN now() ELSE last_healthy_at END,
               last_error = ${patch.error === undefined ? sql`last_error` : patch.error},
               state_changed_at = CASE WHEN ${patch.stateChanged === true} THEN now() ELSE state_changed_at END,
               updated_at = now()
         WHERE agent_id = ${agent.agent_id} AND locked_by = ${holder}`.execute(trx);
      if (Number(r.numAffectedRows ?? 0) === 0) return false;
      for (const e of events) {
        const inserted = await trx
          .insertInto('agent_watchdog_events')
          .values({
            agent_id: agent.agent_id,
            user_id: agent.user_id,
            kind: e.kind,
            from_state: e.from ?? null,
            to_state: e.to ?? null,
            attempt: e.attempt ?? null,
            ok: e.ok ?? null,
            detail: e.detail ? e.detail.slice(0, 2000) : null,
            holder,
          })
          .returning(['id', 'created_at'])
          .executeTakeFirstOrThrow();
        if (e.notify && channels.length) {
          const payload = JSON.stringify({ eventId: inserted.id, ...payloadOf(e, inserted.created_at) });
          await trx
            .insertInto('watchdog_notifications')
            .values(channels.map((channel) => ({ event_id: inserted.id, channel, payload })))
            .onConflict((oc) => oc.columns(['event_id', 'channel']).doNothing())
            .execute();
        }
      }
      return true;
    });
  },

  /** Crashes of one agent within the last `windowMs` (§8 crash-loop window). */
  async crashesSince(db: Conn, agentId: string, windowMs: number): Promise<number> {
    const r = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM agent_watchdog_events
       WHERE agent_id = ${agentId} AND kind = 'crash' AND created_at > now() - make_interval(secs => ${secs(windowMs)})`.execute(db);
    return r.rows[0]?.n ?? 0;
  },

  /**
   * Takes up to `limit` due notifications for sending: each taken row's next attempt moves
   * `claimMs` ahead, so a sender that dies mid-send leaves it to be taken again later.
   */
  async claimNotifications(db: Kysely<DB>, limit: number, claimMs: number): Promise<PendingNotification[]> {
    const r = await sql<PendingNotification>`
      UPDATE watchdog_notifications n
         SET attempts = n.attempts + 1, next_attempt_at = now() + make_interval(secs => ${secs(claimMs)})
       WHERE n.id IN (
         SELECT id FROM watchdog_notifications
          WHERE status = 'pending' AND next_attempt_at <= now()
          ORDER BY id
          LIMIT ${limit}
          FOR UPDATE SKIP LOCKED)
      RETURNING n.id, n.event_id, n.channel, n.attempts, n.payload`.execute(db);
    return r.rows;
  },

  async markNotification(db: Kysely<DB>, id: number, outcome: { sent: true } | { sent: false; error: string; retryInMs: number | null }) {
    if (outcome.sent) {
      await db
        .updateTable('watchdog_notifications')
        .set({ status: 'sent', sent_at: new Date(), last_error: null })
        .where('id', '=', id)
        .execute();
      return;
    }
    await sql`
      UPDATE watchdog_notifications
         SET status = ${outcome.retryInMs === null ? 'failed' : 'pending'}, last_error = ${outcome.error.slice(0, 500)},
             next_attempt_at = now() + make_interval(secs => ${secs(outcome.retryInMs ?? 0)})
       WHERE id = ${id}`.execute(db);
  },

  /** Gives a taken notification back unsent (its sender is stopping): due at once, the attempt not counted. */
  async releaseNotification(db: Kysely<DB>, id: number) {
    await sql`
      UPDATE watchdog_notifications SET attempts = greatest(attempts - 1, 0), next_attempt_at = now()
       WHERE id = ${id} AND status = 'pending'`.execute(db);
  },

  /** The owner's view of one agent's watchdog row (inside withUser). */
  current(trx: Tx, agentId: string) {
    return trx
      .selectFrom('agent_watchdog')
      .select([
        'state',
        'failures',
        'repair_attempts',
        'state_changed_at',
        'last_check_at',
        'last_healthy_at',
        'next_check_at',
        'last_error',
      ])
      .where('agent_id', '=', agentId)
      .executeTakeFirst();
  },

  /** Newest first (inside withUser). */
  history(trx: Tx, agentId: string, limit: number) {
    return trx
      .selectFrom('agent_watchdog_events')
      .select(['id', 'kind', 'from_state', 'to_state', 'attempt', 'ok', 'detail', 'created_at'])
      .where('agent_id', '=', agentId)
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
  },
};
