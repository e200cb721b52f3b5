/**
 * SQL of the agents domain. Everything done for a user runs in the RLS-bound transaction from
 * `db.withUser` (pass the `Tx`). The deployment worker, the start-up reconciliation and the
 * platform-key lookup work across users by design and run on the owner connection (`Kysely<DB>`);
 * those functions say so.
 * Length (~320 lines): every query on the agents tables, kept in one repository by the SQL-only-in-repositories rule.
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { AgentStatus, DB } from '../../db/schema.ts';

type Conn = Kysely<DB> | Tx;

export const agentColumns = [
  'id',
  'user_id',
  'name',
  'model',
  'ai_provider',
  'plan',
  'status',
  'subdomain',
  'url',
  'gateway_url',
  'external_id',
  'config',
  'runtime_version',
  'verified',
  'verification_type',
  'attestation_uid',
  'verified_at',
  'started_at',
  'created_at',
  'updated_at',
] as const;

export type AgentRow = NonNullable<Awaited<ReturnType<typeof agentsRepo.findAgent>>>;
export type JobRow = NonNullable<Awaited<ReturnType<typeof agentsRepo.getJob>>>;

export const agentsRepo = {
  /**
   * Locks the user's row for the rest of the transaction. Provisioning takes this lock before it
   * counts and inserts, so concurrent provisions by one user run one after another and the limit
   * check and the insert are atomic (10 parallel requests of a starter user: exactly one agent).
   */
  lockUser(trx: Tx, userId: string) {
    return trx
      .selectFrom('users')
      .select(['id', 'plan', 'subscription_status', 'email'])
      .where('id', '=', userId)
      .forUpdate()
      .executeTakeFirst();
  },

  async countAgents(trx: Tx, userId: string, excludeId?: string): Promise<number> {
    let q = trx
      .selectFrom('agents')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('user_id', '=', userId);
    if (excludeId) q = q.where('id', '!=', excludeId);
    return (await q.executeTakeFirstOrThrow()).n;
  },

  insertAgent(
    trx: Tx,
    a: {
      id: string;
      userId: string;
      name: string;
      model?: string;
      aiProvider?: string;
      plan?: string;
      status: AgentStatus;
      subdomain: string;
      url: string;
      config?: Record<string, unknown>;
    },
  ) {
    return trx
      .insertInto('agents')
      .values({
        id: a.id,
        user_id: a.userId,
        name: a.name,
        ...(a.model ? { model: a.model } : {}),
        ...(a.aiProvider ? { ai_provider: a.aiProvider } : {}),
        ...(a.plan ? { plan: a.plan } : {}),
        status: a.status,
        subdomain: a.subdomain,
        url: a.url,
        config: JSON.stringify(a.config ?? {}),
      })
      .returning(agentColumns)
      .executeTakeFirstOrThrow();
  },

  listAgents(trx: Tx, userId: string) {
    return trx.selectFrom('agents').select(agentColumns).where('user_id', '=', userId).orderBy('created_at', 'desc').execute();
  },

  findAgent(db: Conn, id: string) {
    return db.selectFrom('agents').select(agentColumns).where('id', '=', id).executeTakeFirst();
  },

  /** The agent's own OS user on the local driver (migration 090): the drivers' business only, never in a view. */
  async sandboxUid(db: Conn, id: string): Promise<number | undefined> {
    const row = await db.selectFrom('agents').select('sandbox_uid').where('id', '=', id).executeTakeFirst();
    return row?.sandbox_uid;
  },

  updateAgent(
    db: Conn,
    id: string,
    patch: Partial<{
      name: string;
      plan: string;
      ai_provider: string;
      model: string;
      status: AgentStatus;
      config: Record<string, unknown>;
      gateway_url: string | null;
      external_id: string | null;
      started_at: Date | null;
    }>,
  ) {
    const { config, ...rest } = patch;
    return db
      .updateTable('agents')
      .set({ ...rest, ...(config ? { config: JSON.stringify(config) } : {}), updated_at: sql`now()` })
      .where('id', '=', id)
      .returning(agentColumns)
      .executeTakeFirst();
  },

  async deleteAgent(trx: Tx, id: string): Promise<boolean> {
    const r = await trx.deleteFrom('agents').where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },

  insertCredentials(trx: Tx, c: { agentId: string; userId: string; gatewayTokenEnc: string }) {
    return trx
      .insertInto('agent_credentials')
      .values({ agent_id: c.agentId, user_id: c.userId, gateway_token_enc: c.gatewayTokenEnc })
      .execute();
  },

  getCredentials(db: Conn, agentId: string) {
    return db.selectFrom('agent_credentials').selectAll().where('agent_id', '=', agentId).executeTakeFirst();
  },

  setPlatformKey(db: Conn, agentId: string, hash: Buffer, prefix: string) {
    return db
      .updateTable('agent_credentials')
      .set({ platform_key_hash: hash, platform_key_prefix: prefix, rotated_at: sql`now()` })
      .where('agent_id', '=', agentId)
      .execute();
  },

  /** A stopped agent's key stops working (docs/agents.md "Model access"); its next deploy issues a fresh one. */
  revokePlatformKey(db: Conn, agentId: string) {
    return db
      .updateTable('agent_credentials')
      .set({ platform_key_hash: null, platform_key_prefix: null, rotated_at: sql`now()` })
      .where('agent_id', '=', agentId)
      .execute();
  },

  /** Owner connection: an agent presents its key before anyone knows which user it acts for. */
  findByPlatformKeyHash(db: Kysely<DB>, hash: Buffer) {
    return db.selectFrom('agent_credentials').select(['agent_id', 'user_id']).where('platform_key_hash', '=', hash).executeTakeFirst();
  },

  /**
   * Enqueues a deploy job unless one is already queued or running for the agent (the partial
   * unique index decides races); returns the active job either way.
   */
  async enqueueDeploy(db: Conn, agentId: string, userId: string, maxAttempts: number) {
    // the active job that made the insert do nothing may finish before the select below runs (each
    // statement sees its own snapshot): then no active job exists any more and the insert is tried again
    for (let attempt = 0; ; attempt++) {
      const inserted = await db
        .insertInto('deployments')
        .values({ agent_id: agentId, user_id: userId, max_attempts: maxAttempts })
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
    const r = await sql<DB['deployments'] & { id: string; attempts: number; max_attempts: number; agent_id: string; user_id: string }>`
      UPDATE deployments d
         SET status = 'running', attempts = d.attempts + 1, locked_by = ${workerId},
             lease_until = now() + make_interval(secs => ${leaseMs / 1000}), updated_at = now()
       WHERE d.id = (
         SELECT id FROM deployments
          WHERE (status = 'queued' AND run_after <= now()) OR (status = 'running' AND lease_until < now())
          ORDER BY run_after
          FOR UPDATE SKIP LOCKED
          LIMIT 1)
      RETURNING d.id, d.agent_id, d.user_id, d.attempts, d.max_attempts`.execute(db);
    return r.rows[0] as { id: string; agent_id: string; user_id: string; attempts: number; max_attempts: number } | undefined;
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

  /** Owner connection: agents the platform believes are running (start-up reconciliation, instance listing). */
  listAllAgents(db: Kysely<DB>, filter: { status?: AgentStatus[]; limit: number; offset?: number }) {
    let q = db
      .selectFrom('agents')
      .select(agentColumns)
      .orderBy('created_at', 'desc')
      .limit(filter.limit)
      .offset(filter.offset ?? 0);
    if (filter.status) q = q.where('status', 'in', filter.status);
    return q.execute();
  },

  insertMessage(
    trx: Tx,
    m: {
      agentId: string;
      userId: string;
      sender: 'user' | 'agent' | 'system';
      content: string;
      platform?: string;
      responseMs?: number | null;
      failed?: boolean;
      /** when it was said (default: now); the order of a history is the order of storing (`seq`) */
      createdAt?: Date;
    },
  ) {
    return trx
      .insertInto('agent_messages')
      .values({
        agent_id: m.agentId,
        user_id: m.userId,
        sender: m.sender,
        content: m.content,
        ...(m.platform ? { platform: m.platform } : {}),
        response_ms: m.responseMs ?? null,
        failed: m.failed ?? false,
        ...(m.createdAt ? { created_at: m.createdAt } : {}),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  },

  async listMessages(trx: Tx, agentId: string, limit: number, offset: number) {
    const [rows, total] = await Promise.all([
      trx
        .selectFrom('agent_messages')
        .selectAll()
        .where('agent_id', '=', agentId)
        // stored order, not time: a turn is stored question first (migration 100)
        .orderBy('seq', 'desc')
        .limit(limit)
        .offset(offset)
        .execute(),
      trx
        .selectFrom('agent_messages')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('agent_id', '=', agentId)
        .executeTakeFirstOrThrow(),
    ]);
    return { rows, total: total.n };
  },

  /** Reply metrics for stats: counts, last-hour rate, mean response time, failure count. */
  async messageStats(trx: Tx, agentId: string) {
    const r = await sql<{ processed: number; last_hour: number; avg_ms: number | null; failed: number }>`
      SELECT count(*)::int AS processed,
             count(*) FILTER (WHERE created_at > now() - interval '1 hour')::int AS last_hour,
             avg(response_ms)::float8 AS avg_ms,
             count(*) FILTER (WHERE failed)::int AS failed
        FROM agent_messages WHERE agent_id = ${agentId} AND sender = 'agent'`.execute(trx);
    return r.rows[0]!;
  },

  /**
   * Owner connection, read-only (the metrics, docs/metrics.md): agents of every user by status,
   * and the deployment queue (queued jobs, age of the oldest in seconds). One transaction whose
   * statement_timeout bounds both queries, so a slow database cannot hold a scrape's connection.
   */
  platformCounts(db: Kysely<DB>, timeoutMs: number) {
    return db.transaction().execute(async (trx) => {
      await sql`select set_config('statement_timeout', ${String(Math.ceil(timeoutMs))}, true)`.execute(trx);
      const agents = await trx
        .selectFrom('agents')
        .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
        .groupBy('status')
        .execute();
      const queue = await sql<{ queued: number; oldest_seconds: number | null }>`
        SELECT count(*)::int AS queued, extract(epoch FROM now() - min(created_at))::float8 AS oldest_seconds
          FROM deployments WHERE status = 'queued'`.execute(trx);
      return { agents, queued: queue.rows[0]!.queued, oldestQueuedSeconds: queue.rows[0]!.oldest_seconds };
    });
  },
};
