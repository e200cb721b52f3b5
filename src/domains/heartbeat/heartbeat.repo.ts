/**
 * SQL of heartbeat settings (§4.12). Everything runs in the RLS-bound transaction of
 * `db.withUser`: the settings rows, the `agents` rows and the `users` row are all per-user, so
 * the ownership check below can only ever see the caller's own agents and runtime instance id.
 */
import { sql } from 'kysely';
import type { Tx } from '../../db/client.ts';

const columns = ['agent_id', 'frequency', 'enabled', 'last_heartbeat', 'next_heartbeat', 'last_updated'] as const;

export const heartbeatRepo = {
  get(trx: Tx, agentId: string) {
    return trx.selectFrom('heartbeat_settings').select(columns).where('agent_id', '=', agentId).executeTakeFirst();
  },

  /** §4.12 ownership: an `agents` row of this user, or the user's runtime instance id. */
  async ownsAgent(trx: Tx, userId: string, agentId: string): Promise<boolean> {
    const row = await trx
      .selectNoFrom((eb) => [
        eb
          .or([
            eb.exists(trx.selectFrom('agents').select(sql`1`.as('one')).where('id', '=', agentId)),
            eb.exists(trx.selectFrom('users').select(sql`1`.as('one')).where('id', '=', userId).where('runtime_instance_id', '=', agentId)),
          ])
          .as('owned'),
      ])
      .executeTakeFirstOrThrow();
    return row.owned === true;
  },

  upsert(
    trx: Tx,
    s: {
      userId: string;
      agentId: string;
      frequency: string;
      enabled: boolean;
      lastHeartbeat: Date;
      nextHeartbeat: Date;
      lastUpdated: Date;
    },
  ) {
    const values = {
      frequency: s.frequency,
      enabled: s.enabled,
      last_heartbeat: s.lastHeartbeat,
      next_heartbeat: s.nextHeartbeat,
      last_updated: s.lastUpdated,
    };
    return trx
      .insertInto('heartbeat_settings')
      .values({ user_id: s.userId, agent_id: s.agentId, ...values })
      .onConflict((oc) => oc.columns(['user_id', 'agent_id']).doUpdateSet(values))
      .returning(columns)
      .executeTakeFirstOrThrow();
  },

  remove(trx: Tx, agentId: string) {
    return trx.deleteFrom('heartbeat_settings').where('agent_id', '=', agentId).execute();
  },
};
