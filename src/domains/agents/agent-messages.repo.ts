/**
 * SQL of agents' stored conversations (§4.7 GET /api/agents/:id/messages, stats): always in the
 * RLS-bound transaction of `db.withUser`, so a user reads and writes only their own agents' messages.
 */
import { sql } from 'kysely';
import type { Tx } from '../../db/client.ts';

export const agentMessagesRepo = {
  insertMessage(
    trx: Tx,
    m: {
      agentId: string;
      userId: string;
      sender: 'user' | 'agent' | 'system';
      content: string;
      platform?: string;
      /** the conversation session it belongs to (migration 250); none for a stateless API call */
      sessionKey?: string | null;
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
        session_key: m.sessionKey ?? null,
        response_ms: m.responseMs ?? null,
        failed: m.failed ?? false,
        ...(m.createdAt ? { created_at: m.createdAt } : {}),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  },

  /** A page of an agent's messages, newest first; `session` keeps those of one conversation session. */
  async listMessages(trx: Tx, agentId: string, limit: number, offset: number, session?: string) {
    const [rows, total] = await Promise.all([
      trx
        .selectFrom('agent_messages')
        .selectAll()
        .where('agent_id', '=', agentId)
        .$if(session !== undefined, (q) => q.where('session_key', '=', session!))
        // stored order, not time: a turn is stored question first (migration 100)
        .orderBy('seq', 'desc')
        .limit(limit)
        .offset(offset)
        .execute(),
      trx
        .selectFrom('agent_messages')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('agent_id', '=', agentId)
        .$if(session !== undefined, (q) => q.where('session_key', '=', session!))
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
};
