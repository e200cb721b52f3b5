/**
 * SQL of the hosting status record. Runs on the owner connection: the record is platform-wide
 * (not per-user data) and is written by an unauthenticated-by-session webhook.
 */
import { type Kysely, sql } from 'kysely';
import type { DB } from '../../db/schema.ts';

export type StoredRecord = { status: string; name: string; message: string | null; eventType: string; receivedAt: Date };

export const hostingStatusRepo = {
  /** Keeps only the newest: a delayed older delivery never overwrites a newer record. */
  async saveLatest(db: Kysely<DB>, r: StoredRecord): Promise<void> {
    const values = { status: r.status, name: r.name, message: r.message, event_type: r.eventType, received_at: r.receivedAt };
    await db
      .insertInto('hosting_status')
      .values({ id: true, ...values })
      .onConflict((oc) => oc.column('id').doUpdateSet(values).where('hosting_status.received_at', '<=', sql<Date>`excluded.received_at`))
      .execute();
  },

  findLatest(db: Kysely<DB>) {
    return db
      .selectFrom('hosting_status')
      .select(['status', 'name', 'message', 'event_type', 'received_at'])
      .where('id', '=', true)
      .executeTakeFirst();
  },
};
