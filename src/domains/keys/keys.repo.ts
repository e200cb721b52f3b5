/**
 * SQL of the API key domain (§4.3; docs/payments.md "API keys"). Owner operations (list, get,
 * create, change, roll, delete) take the RLS-bound transaction from `db.withUser`. Validation takes
 * the owner connection (`Kysely<DB>`) because it runs before any user is known: the key itself is
 * what identifies the user, so there is no user context to set yet. It is one indexed lookup by
 * prefix (the current secret's, or a rolled key's previous secret's while its grace lasts).
 */
import { type Kysely, type SelectQueryBuilder, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/schema.ts';

/** A key as its owner sees it, with its limits and what it spent in the month asked for. */
export type KeyRow = {
  id: string;
  name: string;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  agent_scoped: boolean;
  agent_ids: string[];
  monthly_budget_usd: string | null;
  rate_limit_per_minute: number | null;
  expires_at: Date | null;
  rolled_at: Date | null;
  previous_expires_at: Date | null;
  month_cost: string;
};

/** The limits a key is created or changed with (undefined: unchanged; null: none). */
export type KeyLimitsInput = {
  agentIds?: string[] | null | undefined;
  monthlyBudgetUsd?: number | null | undefined;
  rateLimitPerMinute?: number | null | undefined;
  expiresAt?: Date | null | undefined;
};

/** The agents of a scoped key, as an array (empty for a key that names none, or is not scoped). */
const agentIdsOf = sql<
  string[]
>`coalesce((SELECT array_agg(ka.agent_id ORDER BY ka.agent_id) FROM api_key_agents ka WHERE ka.key_id = api_keys.id), '{}')`;

const ownerSelect = (q: SelectQueryBuilder<DB, 'api_keys', object>, month: string) =>
  q.select([
    'id',
    'name',
    'prefix',
    'created_at',
    'last_used_at',
    'agent_scoped',
    agentIdsOf.as('agent_ids'),
    sql<string | null>`monthly_budget_usd::text`.as('monthly_budget_usd'),
    'rate_limit_per_minute',
    'expires_at',
    'rolled_at',
    // a previous secret past its grace is no longer anything the owner needs to see
    sql<Date | null>`CASE WHEN previous_expires_at > now() THEN previous_expires_at END`.as('previous_expires_at'),
    sql<string>`coalesce((SELECT m.cost FROM ai_usage_key_monthly m WHERE m.key_id = api_keys.id AND m.month = ${month}::date), 0)::text`.as(
      'month_cost',
    ),
  ]);

const limitColumns = (l: KeyLimitsInput) => ({
  ...(l.agentIds !== undefined ? { agent_scoped: l.agentIds !== null } : {}),
  ...(l.monthlyBudgetUsd !== undefined ? { monthly_budget_usd: l.monthlyBudgetUsd === null ? null : l.monthlyBudgetUsd.toFixed(6) } : {}),
  ...(l.rateLimitPerMinute !== undefined ? { rate_limit_per_minute: l.rateLimitPerMinute } : {}),
  ...(l.expiresAt !== undefined ? { expires_at: l.expiresAt } : {}),
});

export const keysRepo = {
  list(trx: Tx, userId: string, month: string): Promise<KeyRow[]> {
    return ownerSelect(trx.selectFrom('api_keys'), month)
      .where('user_id', '=', userId)
      .orderBy('created_at', 'desc')
      .orderBy('id')
      .execute() as Promise<KeyRow[]>;
  },

  find(trx: Tx, userId: string, id: string, month: string): Promise<KeyRow | undefined> {
    return ownerSelect(trx.selectFrom('api_keys'), month).where('user_id', '=', userId).where('id', '=', id).executeTakeFirst() as Promise<
      KeyRow | undefined
    >;
  },

  /** Which of `agentIds` are the caller's agents (row-level security hides the others). */
  async ownedAgents(trx: Tx, agentIds: string[]): Promise<Set<string>> {
    if (agentIds.length === 0) return new Set();
    const rows = await trx.selectFrom('agents').select('id').where('id', 'in', agentIds).execute();
    return new Set(rows.map((r) => r.id));
  },

  async insert(trx: Tx, key: { userId: string; name: string; prefix: string; keyHash: Buffer } & KeyLimitsInput) {
    const row = await trx
      .insertInto('api_keys')
      .values({ user_id: key.userId, name: key.name, prefix: key.prefix, key_hash: key.keyHash, ...limitColumns(key) })
      .returning(['id', 'name', 'created_at'])
      .executeTakeFirstOrThrow();
    if (key.agentIds) await keysRepo.setAgents(trx, key.userId, row.id, key.agentIds);
    return row;
  },

  /** Changes a key's name and limits; false when it is not the caller's. */
  async update(trx: Tx, userId: string, id: string, change: { name?: string | undefined } & KeyLimitsInput): Promise<boolean> {
    const values = { ...(change.name !== undefined ? { name: change.name } : {}), ...limitColumns(change) };
    const r = await trx
      .updateTable('api_keys')
      .set(Object.keys(values).length > 0 ? values : { name: sql`name` })
      .where('user_id', '=', userId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (r.numUpdatedRows === 0n) return false;
    if (change.agentIds !== undefined) {
      await trx.deleteFrom('api_key_agents').where('key_id', '=', id).execute();
      if (change.agentIds) await keysRepo.setAgents(trx, userId, id, change.agentIds);
    }
    return true;
  },

  async setAgents(trx: Tx, userId: string, keyId: string, agentIds: string[]): Promise<void> {
    if (agentIds.length === 0) return;
    await trx
      .insertInto('api_key_agents')
      .values(agentIds.map((agentId) => ({ key_id: keyId, agent_id: agentId, user_id: userId })))
      .execute();
  },

  /**
   * A new secret for the key; the current one becomes the previous secret, accepted until
   * `graceSeconds` from now (a previous secret still in its grace is dropped: one roll back only).
   */
  roll(trx: Tx, userId: string, id: string, next: { prefix: string; keyHash: Buffer; graceSeconds: number }) {
    return trx
      .updateTable('api_keys')
      .set({
        previous_prefix: sql`prefix`,
        previous_key_hash: sql`key_hash`,
        previous_expires_at: sql`now() + make_interval(secs => ${next.graceSeconds})`,
        prefix: next.prefix,
        key_hash: next.keyHash,
        rolled_at: sql`now()`,
      })
      .where('user_id', '=', userId)
      .where('id', '=', id)
      .returning(['id', 'name', 'created_at', 'rolled_at', 'previous_expires_at'])
      .executeTakeFirst();
  },

  async delete(trx: Tx, userId: string, id: string): Promise<boolean> {
    const r = await trx.deleteFrom('api_keys').where('user_id', '=', userId).where('id', '=', id).executeTakeFirst();
    return r.numDeletedRows > 0n;
  },

  /** Every key of the user; returns how many went. */
  async deleteAllOf(trx: Tx, userId: string): Promise<number> {
    const r = await trx.deleteFrom('api_keys').where('user_id', '=', userId).executeTakeFirst();
    return Number(r.numDeletedRows);
  },

  /**
   * Owner connection (see the file comment): candidate secrets sharing the lookup prefix — a key's
   * current secret, or its previous one while the roll's grace lasts — of keys that have not
   * expired, with their limits and their owner's profile. An expired key is not found, exactly
   * as a deleted one. `ends_at`: when this secret stops being accepted (null: never).
   */
  findByPrefix(db: Kysely<DB>, prefix: string) {
    const candidates = (previous: boolean) =>
      db
        .selectFrom('api_keys')
        .innerJoin('users', 'users.id', 'api_keys.user_id')
        .select([
          'api_keys.id',
          previous ? sql<Buffer>`api_keys.previous_key_hash`.as('key_hash') : 'api_keys.key_hash',
          previous
            ? sql<Date | null>`least(api_keys.expires_at, api_keys.previous_expires_at)`.as('ends_at')
            : sql<Date | null>`api_keys.expires_at`.as('ends_at'),
          'api_keys.last_used_at',
          'api_keys.agent_scoped',
          agentIdsOf.as('agent_ids'),
          sql<string | null>`api_keys.monthly_budget_usd::text`.as('monthly_budget_usd'),
          'api_keys.rate_limit_per_minute',
          'users.id as user_id',
          'users.email',
          'users.plan',
          'users.subscription_status',
          'users.is_admin',
          'users.email_verified',
          'users.password_predates_verification',
        ])
        .where(previous ? 'api_keys.previous_prefix' : 'api_keys.prefix', '=', prefix)
        .where((eb) => eb.or([eb('api_keys.expires_at', 'is', null), eb('api_keys.expires_at', '>', sql<Date>`now()`)]))
        .$if(previous, (q) => q.where('api_keys.previous_expires_at', '>', sql<Date>`now()`));
    return candidates(false).unionAll(candidates(true)).execute();
  },

  /** Owner connection: records a use of the key (§2 `lastUsed`). */
  touch(db: Kysely<DB>, id: string) {
    return db.updateTable('api_keys').set({ last_used_at: sql`now()` }).where('id', '=', id).execute();
  },
};
