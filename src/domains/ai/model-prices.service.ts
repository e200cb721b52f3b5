/**
 * What each model costs (docs/payments.md "Model calls from the balance"): the catalogue prices
 * its own models; operators price the others (their custom provider's, a router's models the
 * catalogue does not know) with MODEL_PRICES and on the admin page, whose prices win over both.
 * A model nobody priced is "unpriced": metered at $0 with AI_BILLING=off and said so on the Usage
 * page, refused with AI_BILLING=balance (never free).
 *
 * The admin page writes the `model_prices` table (and who did it, `model_price_changes`). The
 * process that wrote applies it at once; every other process reads the table again every
 * PRICES_RELOAD_MS and, with REDIS_URL, at once when told on PRICES_CHANNEL (as the session and
 * key caches evict across replicas, src/lib/eviction-bus.ts).
 */
import type { Config, ModelPrice } from '../../config/env.ts';
import type { Db } from '../../db/client.ts';
import { badRequest, forbidden, notFound } from '../../lib/errors.ts';
import { createEvictionBus, localOnlyBus } from '../../lib/eviction-bus.ts';
import type { Logger } from '../../lib/logger.ts';
import type { Catalog } from './catalog.service.ts';
import { type ModelPriceRow, modelPricesRepo } from './model-prices.repo.ts';

/** How often a catalogue reads the admin page's prices again (ms): the delay of a change in other replicas without Redis. */
export const PRICES_RELOAD_MS = 30_000;
/** The highest price an operator may set, USD per million tokens (the column's CHECK). */
export const MODEL_PRICE_MAX = 100_000;
/** The Redis channel on which a process that changed a price tells the others to read them again. */
const PRICES_CHANNEL = 'platform:model-prices';
/** How many of the newest price changes the admin page shows. */
const CHANGES_SHOWN = 20;

/** Where a model's price comes from: the catalogue (or the router's list), MODEL_PRICES, the admin page, or nowhere. */
export type ModelPriceSource = 'catalogue' | 'setting' | 'admin' | 'none';

export type ModelPriceView = {
  modelId: string;
  /** the catalogue's name and provider; null for a priced model the catalogue does not list (yet) */
  name: string | null;
  provider: string | null;
  /** USD per million tokens in force; null when unpriced */
  input: number | null;
  output: number | null;
  source: ModelPriceSource;
  /** what MODEL_PRICES says of it, when it names it (applies again when an admin price is removed) */
  setting: ModelPrice | null;
  /** the admin page's price: when and by whom (email; null when that account is gone) */
  updatedAt: string | null;
  updatedBy: string | null;
};

export type ModelPriceChange = { modelId: string; input: number | null; output: number | null; by: string | null; at: string };

type Admin = { id: string; isAdmin: boolean };

/** USD per token (the catalogue's unit) as USD per million tokens, without float noise. */
const perMillion = (perToken: number) => Number((perToken * 1e6).toPrecision(12));

export function createModelPrices(deps: {
  db: Pick<Db, 'kysely'>;
  config: Pick<Config, 'MODEL_PRICES' | 'REDIS_URL' | 'REDIS_TIMEOUT_MS'>;
  catalog: Pick<Catalog, 'setPrices' | 'list'>;
  logger?: Logger | undefined;
}) {
  const { db, config, catalog, logger } = deps;
  const requireAdmin = (actor: Admin) => {
    if (!actor.isAdmin) throw forbidden('Admin access required', 'ADMIN_REQUIRED');
  };
  const check = (modelId: string, p: ModelPrice) => {
    if (modelId.length < 1 || modelId.length > 200) throw badRequest('modelId must be 1 to 200 characters');
    for (const [k, v] of Object.entries(p)) {
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > MODEL_PRICE_MAX)
        throw badRequest(`${k} must be a number of USD per million tokens between 0 and ${MODEL_PRICE_MAX}`);
    }
  };
  /** The admin page's prices over MODEL_PRICES, applied to the catalogue. */
  const apply = (rows: ModelPriceRow[]) => {
    const merged: Record<string, ModelPrice> = { ...config.MODEL_PRICES };
    for (const r of rows) merged[r.model_id] = { input: Number(r.input_per_m), output: Number(r.output_per_m) };
    catalog.setPrices(merged);
  };
  const reload = () =>
    modelPricesRepo.list(db.kysely).then(apply, (err: unknown) => {
      logger?.warn({ err: (err as Error).message }, "model prices: reading the admin page's prices failed");
    });

  catalog.setPrices(config.MODEL_PRICES);
  void reload();
  const timer = setInterval(reload, PRICES_RELOAD_MS);
  timer.unref();
  const bus = config.REDIS_URL
    ? createEvictionBus(config.REDIS_URL, PRICES_CHANNEL, () => void reload(), config.REDIS_TIMEOUT_MS)
    : localOnlyBus;
  /** After a change: here at once, in every other replica through Redis (else within PRICES_RELOAD_MS). */
  const changed = async () => {
    await reload();
    bus.publish('changed');
  };

  return {
    /**
     * Every model of the catalogue and every model an operator priced, with the price in force and
     * where it comes from, and the newest changes made on the admin page (admins).
     */
    async list(actor: Admin): Promise<{ models: ModelPriceView[]; changes: ModelPriceChange[] }> {
      requireAdmin(actor);
      const [rows, changes] = await Promise.all([modelPricesRepo.list(db.kysely), modelPricesRepo.changes(db.kysely, CHANGES_SHOWN)]);
      apply(rows); // what this list shows is what this process charges
      const admin = new Map(rows.map((r) => [r.model_id, r]));
      const setting = (id: string) => (Object.hasOwn(config.MODEL_PRICES, id) ? config.MODEL_PRICES[id]! : null);
      const view = (
        modelId: string,
        m: { name: string; provider: string; inputCost: number; outputCost: number; priced: boolean } | undefined,
      ) => {
        const a = admin.get(modelId);
        const s = setting(modelId);
        const source: ModelPriceSource = a ? 'admin' : s ? 'setting' : m?.priced ? 'catalogue' : 'none';
        const price = a
          ? { input: Number(a.input_per_m), output: Number(a.output_per_m) }
          : (s ?? (m?.priced ? { input: perMillion(m.inputCost), output: perMillion(m.outputCost) } : { input: null, output: null }));
        return {
          modelId,
          name: m?.name ?? null,
          provider: m?.provider ?? null,
          ...price,
          source,
          setting: s,
          updatedAt: a?.updated_at.toISOString() ?? null,
          updatedBy: a?.updated_by ?? null,
        };
      };
      const listed = catalog.list();
      const known = new Set(listed.map((m) => m.id));
      const others = [...new Set([...Object.keys(config.MODEL_PRICES), ...admin.keys()])].filter((id) => !known.has(id)).sort();
      return {
        models: [...listed.map((m) => view(m.id, m)), ...others.map((id) => view(id, undefined))],
        changes: changes.map((c) => ({
          modelId: c.model_id,
          input: c.input_per_m === null ? null : Number(c.input_per_m),
          output: c.output_per_m === null ? null : Number(c.output_per_m),
          by: c.actor_email,
          at: c.created_at.toISOString(),
        })),
      };
    },

    /** Sets the admin page's price of a model (admins); in force at once (every replica: see above). */
    async set(actor: Admin, modelId: string, price: ModelPrice): Promise<void> {
      requireAdmin(actor);
      check(modelId, price);
      await modelPricesRepo.upsert(db.kysely, { modelId, ...price, by: actor.id });
      await changed();
    },

    /** Removes the admin page's price (MODEL_PRICES or the catalogue's, if any, applies again). */
    async remove(actor: Admin, modelId: string): Promise<void> {
      requireAdmin(actor);
      if (!(await modelPricesRepo.remove(db.kysely, modelId, actor.id))) throw notFound('No price set for this model on the admin page');
      await changed();
    },

    async close() {
      clearInterval(timer);
      await bus.close();
    },
  };
}
