/**
 * SQL of idle agents (docs/agents.md "Idle agents sleep"): traffic written in batches, the sweep's
 * claim of agents idle past the setting, and the status moves of a suspend and a wake. The sweep and
 * the flush serve every user and run on the owner connection by design.
 */
import { type Kysely, sql } from 'kysely';
import { LIMITS } from '../../../config/limits.ts';
import type { DB } from '../../../db/schema.ts';
import { type AgentRow, agentColumns } from '../agents.repo.ts';
import { deploymentsRepo } from '../deployments/deployments.repo.ts';

export const idleAgentsRepo = {
  /** Each agent's last traffic, moved forward only (another process may have written a later one). */
  async recordTraffic(db: Kysely<DB>, seen: { ids: string[]; at: Date[] }): Promise<void> {
    if (seen.ids.length === 0) return;
    await sql`
      UPDATE agents a SET last_active_at = s.at
        FROM unnest(${seen.ids}::text[], ${seen.at}::timestamptz[]) AS s(id, at)
       WHERE a.id = s.id AND (a.last_active_at IS NULL OR a.last_active_at < s.at)`.execute(db);
  },

  /**
   * Marks up to `limit` running agents without traffic for `idleS` seconds (since their last
   * traffic, or their start when none came since) `suspended`, and returns them: the claim of the
   * idle sweep, taken FOR UPDATE SKIP LOCKED so two backends never suspend the same agent.
   */
  async claimIdle(db: Kysely<DB>, idleS: number, limit: number): Promise<AgentRow[]> {
    const r = await sql<AgentRow>`
      UPDATE agents SET status = 'suspended', updated_at = now()
       WHERE id IN (
         SELECT id FROM agents
          WHERE status = 'running'
            AND GREATEST(last_active_at, started_at, updated_at) < now() - make_interval(secs => ${idleS})
          ORDER BY last_active_at NULLS FIRST
          LIMIT ${limit}
          FOR UPDATE SKIP LOCKED)
      RETURNING ${sql.join(agentColumns.map((c) => sql.ref(c)))}`.execute(db);
    return r.rows;
  },

  /** The agent's record as the sweep and the waker read it (owner connection). */
  find(db: Kysely<DB>, id: string) {
    return db.selectFrom('agents').select(agentColumns).where('id', '=', id).executeTakeFirst();
  },

  /** Awake again: `running` at `gatewayUrl`, traffic now (so the sweep does not take it back at once). Only from `suspended`. */
  woken(db: Kysely<DB>, id: string, gatewayUrl: string | undefined) {
    return db
      .updateTable('agents')
      .set({
        status: 'running',
        ...(gatewayUrl ? { gateway_url: gatewayUrl } : {}),
        started_at: sql`now()`,
        last_active_at: sql`now()`,
        updated_at: sql`now()`,
      })
      .where('id', '=', id)
      .where('status', '=', 'suspended')
      .returning(agentColumns)
      .executeTakeFirst();
  },

  /**
   * A sleeping agent whose unit is gone (a platform restart, its state removed): `provisioning` and
   * a deployment job, in one transaction, only from `suspended`; false when its status had moved on.
   */
  async redeploy(db: Kysely<DB>, agent: AgentRow): Promise<boolean> {
    return db.transaction().execute(async (trx) => {
      const moved = await trx
        .updateTable('agents')
        .set({ status: 'provisioning', updated_at: sql`now()` })
        .where('id', '=', agent.id)
        .where('status', '=', 'suspended')
        .executeTakeFirst();
      if (Number(moved.numUpdatedRows) === 0) return false;
      await deploymentsRepo.enqueueDeploy(trx, agent.id, agent.user_id, LIMITS.deploymentMaxAttempts);
      return true;
    });
  },

  /** A suspend the driver could not carry out: `running` again, unless something else moved it meanwhile. */
  async unsuspend(db: Kysely<DB>, id: string): Promise<void> {
    await db
      .updateTable('agents')
      .set({ status: 'running', last_active_at: sql`now()`, updated_at: sql`now()` })
      .where('id', '=', id)
      .where('status', '=', 'suspended')
      .execute();
  },
};
