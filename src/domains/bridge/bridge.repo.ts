/**
 * SQL of the bridge message bus (§4.13). The bus is not per-user data: it is the platform's own
 * internal channel between its agents and its operator, guarded by one shared secret, with no
 * user to scope rows to. It therefore has no row-level security and runs on the owner
 * connection (`db.kysely`).
 */
import { type Kysely, sql } from 'kysely';
import type { DB } from '../../db/schema.ts';

export type BridgeMessageRow = {
  id: string;
  sender: string;
  channel: string;
  content: string;
  priority: string;
  created_at: Date;
  seq: number;
};

export const bridgeRepo = {
  insert(db: Kysely<DB>, m: { sender: string; channel: string; content: string; priority: string }) {
    return db
      .insertInto('bridge_messages')
      .values(m)
      .returning(['id', 'sender', 'channel', 'priority', 'created_at'])
      .executeTakeFirstOrThrow();
  },

  /** Messages of a channel since a time, ascending, without touching read state (reader `unknown`). */
  list(db: Kysely<DB>, q: { channel: string; since: Date; limit: number }) {
    return db
      .selectFrom('bridge_messages')
      .select(['id', 'sender', 'channel', 'content', 'priority', 'created_at', 'seq'])
      .where('channel', '=', q.channel)
      .where('created_at', '>=', q.since)
      .orderBy('created_at')
      .orderBy('seq')
      .limit(q.limit)
      .execute();
  },

  /**
   * Claims up to `limit` messages not yet read by `reader`, in one statement: the candidates are
   * inserted into bridge_reads with ON CONFLICT DO NOTHING and only the rows this statement
   * inserted come back. When two calls of one reader race, the second blocks on the first's
   * uncommitted read rows and then skips them, so a message is delivered once per reader.
   */
  async claim(db: Kysely<DB>, q: { channel: string; since: Date; limit: number; reader: string }): Promise<BridgeMessageRow[]> {
    const result = await sql<BridgeMessageRow>`
      WITH candidates AS (
        SELECT m.id, m.created_at, m.seq
        FROM bridge_messages m
        WHERE m.channel = ${q.channel}
          AND m.created_at >= ${q.since}
          AND NOT EXISTS (SELECT 1 FROM bridge_reads r WHERE r.message_id = m.id AND r.reader = ${q.reader})
        ORDER BY m.created_at, m.seq
        LIMIT ${q.limit}
      ), claimed AS (
        INSERT INTO bridge_reads (message_id, reader)
        -- a fixed lock order: racing claims wait on each other instead of deadlocking
        SELECT id, ${q.reader} FROM candidates ORDER BY created_at, seq
        ON CONFLICT DO NOTHING
        RETURNING message_id
      )
      SELECT m.id, m.sender, m.channel, m.content, m.priority, m.created_at, m.seq
      FROM bridge_messages m
      JOIN claimed c ON c.message_id = m.id
      ORDER BY m.created_at, m.seq`.execute(db);
    return result.rows;
  },

  async stats(db: Kysely<DB>) {
    const [count, last] = await Promise.all([
      db
        .selectFrom('bridge_messages')
        .select((eb) => eb.fn.countAll<number>().as('total'))
        .executeTakeFirstOrThrow(),
      db
        .selectFrom('bridge_messages')
        .select(['created_at', 'sender', 'channel'])
        .orderBy('created_at', 'desc')
        .orderBy('seq', 'desc')
        .limit(1)
        .executeTakeFirst(),
    ]);
    return { total: Number(count.total), last: last ?? null };
  },
};
