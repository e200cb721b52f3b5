/**
 * SQL of the agent configuration domain (§4.2). Every function takes the RLS-bound transaction
 * from `db.withUser`: configuration is only ever read or written on behalf of its owner.
 */
import { sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { JsonObject } from '../../lib/storable-json.ts';

export const configRepo = {
  /** The user's plan, for the default configuration. */
  async userPlan(trx: Tx, userId: string): Promise<string | undefined> {
    const row = await trx.selectFrom('users').select('plan').where('id', '=', userId).executeTakeFirst();
    return row?.plan;
  },

  findConfig(trx: Tx, userId: string) {
    return trx.selectFrom('agent_configs').select(['config', 'last_backup_ms']).where('user_id', '=', userId).executeTakeFirst();
  },

  /**
   * Takes the per-user configuration lock: creates the row when missing (a concurrent creator
   * makes this wait, then do nothing), then `SELECT … FOR UPDATE` holds it until the
   * transaction ends. Returns the locked row.
   */
  async lockConfig(trx: Tx, userId: string) {
    await trx
      .insertInto('agent_configs')
      .values({ user_id: userId, config: null })
      .onConflict((oc) => oc.column('user_id').doNothing())
      .execute();
    return trx
      .selectFrom('agent_configs')
      .select(['config', 'last_backup_ms'])
      .where('user_id', '=', userId)
      .forUpdate()
      .executeTakeFirstOrThrow();
  },

  saveConfig(trx: Tx, userId: string, config: JsonObject, lastBackupMs: number) {
    return trx
      .updateTable('agent_configs')
      .set({ config: JSON.stringify(config), last_backup_ms: lastBackupMs, updated_at: sql`now()` })
      .where('user_id', '=', userId)
      .execute();
  },

  insertBackup(trx: Tx, userId: string, backup: { id: string; config: JsonObject; createdAt: Date }) {
    return trx
      .insertInto('config_backups')
      .values({ user_id: userId, id: backup.id, config: JSON.stringify(backup.config), created_at: backup.createdAt })
      .execute();
  },

  findBackup(trx: Tx, userId: string, backupId: string) {
    return trx
      .selectFrom('config_backups')
      .select(['id', 'config'])
      .where('user_id', '=', userId)
      .where('id', '=', backupId)
      .executeTakeFirst();
  },

  /** Newest first. */
  listBackups(trx: Tx, userId: string) {
    return trx.selectFrom('config_backups').select(['id', 'created_at']).where('user_id', '=', userId).orderBy('seq', 'desc').execute();
  },

  /** Drops all but the newest `keep` backups of the user. */
  pruneBackups(trx: Tx, userId: string, keep: number) {
    return trx
      .deleteFrom('config_backups')
      .where('user_id', '=', userId)
      .where(
        'seq',
        'not in',
        trx.selectFrom('config_backups').select('seq').where('user_id', '=', userId).orderBy('seq', 'desc').limit(keep),
      )
      .execute();
  },
};
