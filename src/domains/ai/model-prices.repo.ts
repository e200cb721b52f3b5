/** SQL of the operator's model prices (migration 220): platform data, on the owner connection only. */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';

export type ModelPriceRow = { model_id: string; input_per_m: string; output_per_m: string; updated_at: Date };

export const modelPricesRepo = {
  list(db: Kysely<DB>): Promise<ModelPriceRow[]> {
    return db.selectFrom('model_prices').select(['model_id', 'input_per_m', 'output_per_m', 'updated_at']).orderBy('model_id').execute();
  },

  async upsert(db: Kysely<DB>, p: { modelId: string; input: number; output: number; by: string }): Promise<void> {
    const values = { input_per_m: String(p.input), output_per_m: String(p.output), updated_by: p.by };
    await db
      .insertInto('model_prices')
      .values({ model_id: p.modelId, ...values })
      .onConflict((oc) => oc.column('model_id').doUpdateSet({ ...values, updated_at: new Date() }))
      .execute();
  },

  async remove(db: Kysely<DB>, modelId: string): Promise<boolean> {
    const r = await db.deleteFrom('model_prices').where('model_id', '=', modelId).executeTakeFirst();
    return r.numDeletedRows > 0n;
  },
};
