/**
 * What each model costs (docs/payments.md "Model calls from the balance"): the catalogue prices
 * its own models; operators price the others (their custom provider's, a router's models the
 * catalogue does not know) with MODEL_PRICES and on the admin page, whose prices win over both.
 * A model nobody priced is "unpriced": metered at $0 with AI_BILLING=off and said so on the Usage
 * page, refused with AI_BILLING=balance (never free).
 *
 * The admin page writes the `model_prices` table; every process's catalogue reads it again within
 * PRICES_RELOAD_MS (at once in the process that wrote).
 */
import type { Config, ModelPrice } from '../../config/env.ts';
import type { Db } from '../../db/client.ts';
import { badRequest, notFound } from '../../lib/errors.ts';
import { modelPricesRepo } from './model-prices.repo.ts';

/** How often a catalogue reads the admin page's prices again (ms): the delay of a change in other replicas. */
export const PRICES_RELOAD_MS = 30_000;
/** The highest price an operator may set, USD per million tokens (the column's CHECK). */
export const MODEL_PRICE_MAX = 100_000;

export type PricedModel = { modelId: string; input: number; output: number; source: 'setting' | 'admin' };

export function createModelPrices(deps: { db: Pick<Db, 'kysely'>; config: Pick<Config, 'MODEL_PRICES'> }) {
  const { db, config } = deps;
  const check = (modelId: string, p: ModelPrice) => {
    if (modelId.length < 1 || modelId.length > 200) throw badRequest('modelId must be 1 to 200 characters');
    for (const [k, v] of Object.entries(p)) {
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > MODEL_PRICE_MAX)
        throw badRequest(`${k} must be a number of USD per million tokens between 0 and ${MODEL_PRICE_MAX}`);
    }
  };
  return {
    /** The operator's prices, the admin page's over MODEL_PRICES (what the catalogue applies). */
    async load(): Promise<Record<string, ModelPrice>> {
      const merged: Record<string, ModelPrice> = { ...config.MODEL_PRICES };
      for (const r of await modelPricesRepo.list(db.kysely))
        merged[r.model_id] = { input: Number(r.input_per_m), output: Number(r.output_per_m) };
      return merged;
    },

    /** Every operator price with where it comes from (the admin page). */
    async list(): Promise<PricedModel[]> {
      const fromAdmin = await modelPricesRepo.list(db.kysely);
      const admin = new Set(fromAdmin.map((r) => r.model_id));
      return [
        ...Object.entries(config.MODEL_PRICES)
          .filter(([id]) => !admin.has(id))
          .map(([modelId, p]) => ({ modelId, ...p, source: 'setting' as const })),
        ...fromAdmin.map((r) => ({
          modelId: r.model_id,
          input: Number(r.input_per_m),
          output: Number(r.output_per_m),
          source: 'admin' as const,
        })),
      ].sort((a, b) => (a.modelId < b.modelId ? -1 : 1));
    },

    async set(adminId: string, modelId: string, price: ModelPrice): Promise<void> {
      check(modelId, price);
      await modelPricesRepo.upsert(db.kysely, { modelId, ...price, by: adminId });
    },

    /** Removes the admin page's price (MODEL_PRICES, if it names the model, applies again). */
    async remove(modelId: string): Promise<void> {
      if (!(await modelPricesRepo.remove(db.kysely, modelId))) throw notFound('No price set for this model on the admin page');
    },
  };
}
