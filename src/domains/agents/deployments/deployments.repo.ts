/**
 * SQL of the deployment queue (§4.18, §3 provisioning): one row per deploy job, at most one queued
 * or running per agent (a partial unique index). Requests for a user run in the RLS-bound
 * transaction of `db.withUser`; the worker's claim, renewal and finish serve every user and run on
 * the owner connection (`Kysely<DB>`). A claimed job carries its holder (`locked_by`) and a lease
 * (`lease_until`): every write of the holder is fenced by `locked_by`, and a job whose lease passed
 * (its worker died) is claimed again.
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../../db/client.ts';
import type { DB } from '../../../db/schema.ts';

type Conn = Kysely<DB> | Tx;

export type JobRow = NonNullable<Awaited<ReturnType<typeof deploymentsRepo.getJob>>>;
/** A job as the worker holds it: `attempts` already counts the attempt it is running. */
export type ClaimedJob = { id: string; agent_id: string; user_id: string; attempts: number; max_attempts: number; git_init: boolean };

export const deploymentsRepo = {
  /**
   * Enqueues a deploy job unless one is already queued or running for the agent (the partial
   * unique index decides races); returns the active job either way. `gitInit` (provisioning's,
   * docs/agents.md "A repository from the start") is set on the active job a request joins, too.
   */
  async enqueueDeploy(db: Conn, agentId: string, userId: string, maxAttempts: number, options: { gitInit?: boolean } = {}) {
    const gitInit = options.gitInit === true;
    // the active job that made the insert do nothing may finish before the select below runs (each
    // statement sees its own snapshot): then no active job exists any more and the insert is tried again
    for (let attempt = 0; ; attempt++) {
      const inserted = await db
        .insertInto('deployments')
        .values({ agent_id: agentId, user_id: userId, max_attempts: maxAttempts, git_init: gitInit })
        .onConflict((oc) => oc.column('agent_id').where('status', 'in', ['queued', 'running']).doNothing())
        .returningAll()
        .executeTakeFirst();
      if (inserted) return inserted;
      const active = await db
        .selectFrom('deployments')
        .selectAll()
        .where('agent_id', '=', agentId)
        .where('status', 'in', ['queued', 'running'])
        .executeTakeFirst();
      if (active && gitInit && !active.git_init)
        return db.updateTable('deployments').set({ git_init: true }).where('id', '=', active.id).returningAll().executeTakeFirstOrThrow();
      if (active) return active;
      if (attempt >= 5) throw new Error(`could not enqueue a deployment for agent ${agentId}`);
    }
  },

  getJob(db: Conn, id: string) {
    return db.selectFrom('deployments').selectAll().where('id', '=', id).executeTakeFirst();
  },

  /**
   * Owner connection (the worker serves every user). Takes the oldest due job — queued and due,
   * or running with an expired lease (its worker died) — skipping rows another worker holds, and
   * leases it to `workerId` in the same statement.
   */
  async takeJob(db: Kysely<DB>, workerId: string, leaseMs: number) {
    const r = await sql<ClaimedJob>`
      UPDATE deployments d
         SET status = 'running', attempts = d.attempts + 1, locked_by = ${workerId},
             lease_until = now() + make_interval(secs => ${leaseMs / 1000}), updated_at = now()
       WHERE d.id = (
         SELECT id FROM deployments
          WHERE (status = 'queued' AND run_after <= now()) OR (status = 'running' AND lease_until < now())
          ORDER BY run_after
          FOR UPDATE SKIP LOCKED
          LIMIT 1)
      RETURNING d.id, d.agent_id, d.user_id, d.attempts, d.max_attempts, d.git_init`.execute(db);
    return r.rows[0];
  },

  /** Extends the lease while the holder still owns the job; false when another worker took it over. */
  async renewLease(db: Kysely<DB>, jobId: string, workerId: string, leaseMs: number): Promise<boolean> {
    const r = await db
      .updateTable('deployments')
      .set({ lease_until: sql`now() + make_interval(secs => ${leaseMs / 1000})`, updated_at: sql`now()` })
      .where('id', '=', jobId)
      .where('locked_by', '=', workerId)
      .where('status', '=', 'running')
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },

  /** Finishes a job the worker still holds (fencing by `locked_by`); false when it lost the lease. */
  async finishJob(
    db: Conn,
    jobId: string,
    workerId: string,
    outcome: {
      status: 'succeeded' | 'failed' | 'queued';
      error?: string;
      retryInMs?: number /** give the attempt back (the worker was stopped, the job did not fail) */;
      uncount?: boolean;
    },
  ): Promise<boolean> {
    const r = await db
      .updateTable('deployments')
      .set({
        ...(outcome.uncount ? { attempts: sql`greatest(attempts - 1, 0)` } : {}),
        status: outcome.status,
        last_error: outcome.error ?? null,
        locked_by: null,
        lease_until: null,
        updated_at: sql`now()`,
        ...(outcome.status === 'queued'
          ? { run_after: sql`now() + make_interval(secs => ${(outcome.retryInMs ?? 0) / 1000})` }
          : { finished_at: sql`now()` }),
      })
      .where('id', '=', jobId)
      .where('locked_by', '=', workerId)
      .where('status', '=', 'running')
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },

  /** The queue for the metrics (docs/metrics.md): queued jobs and the age of the oldest, in the caller's transaction. */
  async queueStats(trx: Tx | Kysely<DB>) {
    const r = await sql<{ queued: number; oldest_seconds: number | null }>`
      SELECT count(*)::int AS queued, extract(epoch FROM now() - min(created_at))::float8 AS oldest_seconds
        FROM deployments WHERE status = 'queued'`.execute(trx);
    return { queued: r.rows[0]!.queued, oldestQueuedSeconds: r.rows[0]!.oldest_seconds };
  },
};
