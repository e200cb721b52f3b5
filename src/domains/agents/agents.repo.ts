/**
 * SQL of the agents' records and credentials. Everything done for a user runs in the RLS-bound
 * transaction from `db.withUser` (pass the `Tx`). The start-up reconciliation, the metrics and the
 * platform-key lookup work across users by design and run on the owner connection (`Kysely<DB>`);
 * those functions say so. The deployment queue is deployments/deployments.repo.ts, the stored
 * conversations agent-messages.repo.ts.
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { AgentStatus, DB } from '../../db/schema.ts';
import { deploymentsRepo } from './deployments/deployments.repo.ts';

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

  /**
   * The agent's row, locked for the rest of the transaction (after the user's, `lockUser`: every
   * lifecycle transaction takes the two in that order, so none waits for the other in reverse and
   * PostgreSQL never has to break a deadlock, 40P01). FOR NO KEY UPDATE: inserts that reference the
   * agent (a deployment job) are not blocked by it.
   */
  lockAgent(trx: Tx, id: string) {
    return trx.selectFrom('agents').select(agentColumns).where('id', '=', id).forNoKeyUpdate().executeTakeFirst();
  },

  /**
   * Sets the status (and what goes with it) only while the agent's status is one of `from`: a
   * deployment marks its agent running only if nobody stopped it meanwhile. Owner connection (the
   * deployment worker serves every user). Returns the row, or undefined when the status had moved on.
   */
  setStatusIf(
    db: Kysely<DB>,
    id: string,
    from: AgentStatus[],
    patch: { status: AgentStatus; gateway_url?: string; external_id?: string; started_at?: Date },
  ) {
    return db
      .updateTable('agents')
      .set({ ...patch, updated_at: sql`now()` })
      .where('id', '=', id)
      .where('status', 'in', from)
      .returning(agentColumns)
      .executeTakeFirst();
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
    return db
      .selectFrom('agent_credentials')
      .innerJoin('agents', 'agents.id', 'agent_credentials.agent_id')
      .select(['agent_credentials.agent_id', 'agent_credentials.user_id', 'agents.model'])
      .where('agent_credentials.platform_key_hash', '=', hash)
      .executeTakeFirst();
  },

  /** Owner connection: agents whose model is one of `models` (the seed's names, settled at start-up). */
  agentsWithModels(db: Kysely<DB>, models: readonly string[]) {
    return db
      .selectFrom('agents')
      .select(['id', 'user_id', 'model'])
      .where('model', 'in', [...models])
      .execute();
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
      const queue = await deploymentsRepo.queueStats(trx);
      return { agents, ...queue };
    });
  },
};
