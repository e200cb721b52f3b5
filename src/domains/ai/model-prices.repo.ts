/**
 * SQL of the operator's model prices (migration 220) and their history (migration 270): platform
 * data, on the owner connection only.
 */
import { type Kysely, sql } from 'kysely';
import type { DB } from '../../db/schema.ts';

export type ModelPriceRow = {
  model_id: string;
  input_per_m: string;
  output_per_m: string;
  updated_at: Date;
  /** the admin's email; null when that account is gone */
  updated_by: string | null;
};

export type ModelPriceChangeRow = {
  model_id: string;
  /** null: the admin page's price was removed */
  input_per_m: string | null;
  output_per_m: string | null;
  actor_user_id: string;
  actor_email: string | null;
  created_at: Date;
};

export const modelPricesRepo = {
  list(db: Kysely<DB>): Promise<ModelPriceRow[]> {
    return db
      .selectFrom('model_prices as p')
      .leftJoin('users as u', 'u.id', 'p.updated_by')
      .select(['p.model_id', 'p.input_per_m', 'p.output_per_m', 'p.updated_at', 'u.email as updated_by'])
      .orderBy('p.model_id')
      .execute();
  },

  /** The newest changes first. */
  changes(db: Kysely<DB>, limit: number): Promise<ModelPriceChangeRow[]> {
    return db
      .selectFrom('model_price_changes as c')
      .leftJoin('users as u', 'u.id', 'c.actor_user_id')
      .select(['c.model_id', 'c.input_per_m', 'c.output_per_m', 'c.actor_user_id', 'u.email as actor_email', 'c.created_at'])
      .orderBy('c.id', 'desc')
      .limit(limit)
      .execute();
  },

  /** Sets a price and records who did, in one transaction. */
  async upsert(db: Kysely<DB>, p: { modelId: string; input: number; output: number; by: string }): Promise<void> {
    const values = { input_per_m: String(p.input), output_per_m: String(p.output), updated_by: p.by };
    await db.transaction().execute(async (trx) => {
      await trx
        .insertInto('model_prices')
        .values({ model_id: p.modelId, ...values })
        .onConflict((oc) => oc.column('model_id').doUpdateSet({ ...values, updated_at: sql`now()` }))
        .execute();
      await trx
        .insertInto('model_price_changes')
        .values({ model_id: p.modelId, input_per_m: values.input_per_m, output_per_m: values.output_per_m, actor_user_id: p.by })
        .execute();
    });
  },

  /** Removes a price and records who did, in one transaction; false when there was none. */
  async remove(db: Kysely<DB>, modelId: string, by: string): Promise<boolean> {
    return db.transaction().execute(async (trx) => {
      const r = await trx.deleteFrom('model_prices').where('model_id', '=', modelId).executeTakeFirst();
      if (r.numDeletedRows === 0n) return false;
      await trx.insertInto('model_price_changes').values({ model_id: modelId, actor_user_id: by }).execute();
      return true;
    });
  },
};
