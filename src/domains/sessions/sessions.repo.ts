/**
 * SQL of conversation sessions (migration 250): each session's state and its turns, always in the
 * RLS-bound transaction of `db.withUser`, so a user reads and changes only their own agents' sessions.
 */
import { sql } from 'kysely';
import type { Tx } from '../../db/client.ts';

export const sessionsRepo = {
  /** Whether the agent is one of the user's (row-level security hides the others). */
  async agentExists(trx: Tx, agentId: string) {
    return !!(await trx.selectFrom('agents').select('id').where('id', '=', agentId).executeTakeFirst());
  },

  /** The session's summary and the last message no longer sent to the model; undefined before its first compaction or reset. */
  findSession(trx: Tx, agentId: string, key: string) {
    return trx
      .selectFrom('agent_sessions')
      .select(['summary', 'since_seq', 'compactions'])
      .where('agent_id', '=', agentId)
      .where('key', '=', key)
      .executeTakeFirst();
  },

  /** The session's messages after `sinceSeq`, oldest first. */
  turns(trx: Tx, agentId: string, key: string, sinceSeq: number) {
    return trx
      .selectFrom('agent_messages')
      .select(['seq', 'sender', 'content'])
      .where('agent_id', '=', agentId)
      .where('session_key', '=', key)
      .where('seq', '>', sinceSeq)
      .where('sender', 'in', ['user', 'agent'])
      .orderBy('seq', 'asc')
      .execute();
  },

  /** Compaction: the turns up to `sinceSeq` are now `summary`. */
  async compacted(trx: Tx, s: { agentId: string; userId: string; key: string; summary: string; sinceSeq: number }) {
    await trx
      .insertInto('agent_sessions')
      .values({ agent_id: s.agentId, user_id: s.userId, key: s.key, summary: s.summary, since_seq: s.sinceSeq, compactions: 1 })
      .onConflict((oc) =>
        oc.columns(['agent_id', 'key']).doUpdateSet({
          summary: s.summary,
          since_seq: s.sinceSeq,
          compactions: sql`agent_sessions.compactions + 1`,
          updated_at: sql`now()`,
        }),
      )
      .execute();
  },

  /** A reset: nothing said so far is sent again (the messages stay for the owner to read). */
  async reset(trx: Tx, s: { agentId: string; userId: string; key: string }) {
    const last = await trx
      .selectFrom('agent_messages')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .where('agent_id', '=', s.agentId)
      .executeTakeFirst();
    const sinceSeq = Number(last?.seq ?? 0);
    await trx
      .insertInto('agent_sessions')
      .values({ agent_id: s.agentId, user_id: s.userId, key: s.key, summary: null, since_seq: sinceSeq })
      .onConflict((oc) => oc.columns(['agent_id', 'key']).doUpdateSet({ summary: null, since_seq: sinceSeq, updated_at: sql`now()` }))
      .execute();
  },
};
