/**
 * User API keys (§2 "API key", §4.3). A key is `sk_` plus 40 base64url characters (240 bits from
 * the CSPRNG). Only its SHA-256 and its first 10 characters (the lookup prefix, shown to the owner
 * as `keyPreview`) are stored; the raw key is returned once, by `create`.
 *
 * Validation follows §4.3: look up by the first 10 characters (one indexed query), compare the
 * SHA-256 of the presented key with each candidate's in constant time, return the owner's profile.
 * A key may carry limits (docs/payments.md "API keys"): the agents it reaches, a monthly budget, a
 * rate limit and an expiry; rolling it gives it a new secret while the old one works for a grace
 * period. An expired key, and an old secret past its grace, are refused exactly as a deleted key.
 * A plain SHA-256 (not a slow password hash) is right here: the key has 240 bits of entropy, so
 * there is nothing to brute-force, and verification stays one hash and one query.
 */

import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Db, Tx } from '../../db/client.ts';
import { sha256, sha256Hex } from '../../lib/crypto.ts';
import { AppError, badRequest, notFound } from '../../lib/errors.ts';
import type { KeyCache } from '../../lib/evicting-cache.ts';
import { UUID_PATTERN } from '../../lib/ids.ts';
import type { RateDecision, RateLimiter } from '../../lib/rate-limiter.ts';
import { isAdminUser } from '../accounts/index.ts';
import { type KeyLimitsInput, type KeyRow, keysRepo } from './keys.repo.ts';

export const API_KEY_PREFIX = 'sk_';
/** 30 random bytes → 40 base64url characters. */
const KEY_RANDOM_BYTES = 30;

export type ApiKeySummary = {
  id: string;
  name: string;
  keyPreview: string;
  createdAt: string;
  lastUsed: string | null;
  /** the agents the key reaches; null: every agent of its owner */
  agentIds: string[] | null;
  /** USD per UTC calendar month the key's model calls may cost; null: no budget */
  monthlyBudgetUsd: number | null;
  /** USD the key's model calls cost since the first of this UTC month (rounded to 1e-6) */
  monthToDateUsd: number;
  /** requests per minute; null: no limit of its own */
  rateLimitPerMinute: number | null;
  /** when the key stops working; null: never */
  expiresAt: string | null;
  expired: boolean;
  /** when the key was last rolled; null: never */
  rolledAt: string | null;
  /** until when the secret the last roll replaced still works; null: it no longer does */
  previousKeyExpiresAt: string | null;
};
export type KeyProfile = { valid: true; userId: string; email: string; plan: string; subscriptionStatus: string; features: string[] };
export type KeyValidation = KeyProfile | { valid: false; error: string };
/** What a valid key may do, for the routes it reaches (the account scope's `request.caller.key`). */
export type KeyLimits = {
  id: string;
  /** the agents it reaches; null: all of its owner's */
  agentIds: readonly string[] | null;
  monthlyBudgetUsd: number | null;
  rateLimitPerMinute: number | null;
};
/** A valid key: its owner's profile and its own limits. */
export type AuthenticatedKey = { valid: true; profile: KeyProfile; key: KeyLimits };

/**
 * Features a key's owner may use, by plan (§2 Plans; the list itself is not shown in §4.3).
 * Every plan: agents, AI chat, configuration, API keys, workflows, bridge, A2A messaging.
 * Collective and above: the coding tool profile (§2 configuration). Network: every model and
 * no agent limit. Admins get network-level access (§2 Plans).
 */
export const PLAN_FEATURES: Record<'solo' | 'collective' | 'label' | 'network', string[]> = {
  solo: ['agents', 'ai_chat', 'config', 'api_keys', 'workflows', 'bridge', 'a2a_messaging', 'messaging_tools'],
  collective: ['agents', 'ai_chat', 'config', 'api_keys', 'workflows', 'bridge', 'a2a_messaging', 'messaging_tools', 'coding_tools'],
  label: ['agents', 'ai_chat', 'config', 'api_keys', 'workflows', 'bridge', 'a2a_messaging', 'messaging_tools', 'coding_tools'],
  network: [
    'agents',
    'ai_chat',
    'config',
    'api_keys',
    'workflows',
    'bridge',
    'a2a_messaging',
    'messaging_tools',
    'coding_tools',
    'all_models',
    'unlimited_agents',
  ],
};

export const INVALID_KEY = 'Invalid API key';

const round6 = (n: number) => Math.round(n * 1e6) / 1e6;
/** First day of the UTC month of `d`, as `YYYY-MM-01` (the month a key's spend is counted in). */
const monthOf = (d: Date) => `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}-01`;

const toSummary = (r: KeyRow, at: number): ApiKeySummary => ({
  id: r.id,
  name: r.name,
  keyPreview: r.prefix,
  createdAt: r.created_at.toISOString(),
  lastUsed: r.last_used_at ? r.last_used_at.toISOString() : null,
  agentIds: r.agent_scoped ? r.agent_ids : null,
  monthlyBudgetUsd: r.monthly_budget_usd === null ? null : Number(r.monthly_budget_usd),
  monthToDateUsd: round6(Number(r.month_cost)),
  rateLimitPerMinute: r.rate_limit_per_minute,
  expiresAt: r.expires_at ? r.expires_at.toISOString() : null,
  expired: r.expires_at !== null && r.expires_at.getTime() <= at,
  rolledAt: r.rolled_at ? r.rolled_at.toISOString() : null,
  previousKeyExpiresAt: r.previous_expires_at ? r.previous_expires_at.toISOString() : null,
});

/** What a caller may ask a key to be limited to (create, change): checked types, from the route's schema. */
export type KeyLimitsRequest = {
  agentIds?: string[] | null | undefined;
  monthlyBudgetUsd?: number | null | undefined;
  rateLimitPerMinute?: number | null | undefined;
  /** ISO 8601 */
  expiresAt?: string | null | undefined;
};

export type KeysDeps = {
  db: Db;
  config: Pick<Config, 'ADMIN_EMAILS' | 'ADMIN_EMAILS_REQUIRE_VERIFIED'>;
  /** verified keys (src/lib/evicting-cache.ts); without one every validation reads the database */
  cache?: KeyCache<AuthenticatedKey>;
  /** counts each key's requests per minute (its `rateLimitPerMinute`); without one keys have no rate limit */
  rateLimiter?: Pick<RateLimiter, 'consume'> & Partial<Pick<RateLimiter, 'consumeNow'>>;
  now?: () => number;
};

/** `lastUsed` is written at most this often per key (off the hot path: a minute is its resolution). */
const TOUCH_EVERY_MS = 60_000;
const RATE_WINDOW_MS = 60_000;

const notFoundKey = () => notFound('API key not found');

export function createKeysService(deps: KeysDeps) {
  const { db, config } = deps;
  const now = deps.now ?? Date.now;
  /** when this process last wrote each key's last_used_at */
  const touched = new Map<string, number>();
  function touchLater(keyId: string) {
    const t = now();
    if (t - (touched.get(keyId) ?? 0) < TOUCH_EVERY_MS) return;
    touched.set(keyId, t);
    if (touched.size > 100_000) touched.delete(touched.keys().next().value!);
    void keysRepo.touch(db.kysely, keyId).catch(() => touched.delete(keyId));
  }

  const newSecret = () => {
    const key = API_KEY_PREFIX + randomBytes(KEY_RANDOM_BYTES).toString('base64url');
    return { key, prefix: key.slice(0, LIMITS.apiKeyPrefixLength), keyHash: sha256(key) };
  };

  const checkedName = (rawName: string) => {
    const name = rawName.trim();
    if (!name) throw badRequest('Name required');
    if (name.length > LIMITS.apiKeyNameMax) throw badRequest(`Name must be at most ${LIMITS.apiKeyNameMax} characters`);
    return name;
  };

  /**
   * The limits as stored: agents deduplicated and every one the caller's (400 naming the first that
   * is not, as an unknown one), an expiry in the future and at most LIMITS.apiKeyExpiryMaxMs away.
   */
  const checkedLimits = async (trx: Tx, l: KeyLimitsRequest): Promise<KeyLimitsInput> => {
    let agentIds: string[] | null | undefined;
    if (l.agentIds !== undefined && l.agentIds !== null) {
      agentIds = [...new Set(l.agentIds)];
      if (agentIds.length === 0)
        throw badRequest('agentIds: name at least one of your agents, or leave it out (null) for a key that reaches all of them');
      if (agentIds.length > LIMITS.apiKeyAgentsMax) throw badRequest(`agentIds: at most ${LIMITS.apiKeyAgentsMax} agents`);
      const owned = await keysRepo.ownedAgents(trx, agentIds);
      const unknown = agentIds.find((id) => !owned.has(id));
      if (unknown !== undefined) throw badRequest(`agentIds: ${JSON.stringify(unknown)} is not one of your agents`);
    } else agentIds = l.agentIds;
    let expiresAt: Date | null | undefined;
    if (typeof l.expiresAt === 'string') {
      expiresAt = new Date(l.expiresAt);
      if (Number.isNaN(expiresAt.getTime())) throw badRequest('expiresAt: must be a date and time (ISO 8601), or null');
      if (expiresAt.getTime() <= now()) throw badRequest('expiresAt: must be in the future');
      if (expiresAt.getTime() > now() + LIMITS.apiKeyExpiryMaxMs) throw badRequest('expiresAt: must be within ten years');
    } else expiresAt = l.expiresAt;
    return { agentIds, monthlyBudgetUsd: l.monthlyBudgetUsd, rateLimitPerMinute: l.rateLimitPerMinute, expiresAt };
  };

  const read = (userId: string, id: string) =>
    db.withUser(userId, async (trx) => {
      const row = await keysRepo.find(trx, userId, id, monthOf(new Date(now())));
      if (!row) throw notFoundKey();
      return toSummary(row, now());
    });

  /**
   * §4.3 validation flow, and the key's limits. An invalid key — unknown, deleted, expired, or a
   * rolled key's old secret past its grace — is an expected outcome, returned as a value
   * (docs/architecture.md rule 3), the same for each. A valid one counts as a use of the key:
   * `lastUsed` is updated. A cached entry lasts no longer than the secret it was made for.
   */
  async function authenticate(apiKey: string): Promise<AuthenticatedKey | { valid: false; error: string }> {
    if (!apiKey.startsWith(API_KEY_PREFIX) || apiKey.length > LIMITS.apiKeyMaxLength || apiKey.length <= LIMITS.apiKeyPrefixLength) {
      return { valid: false, error: INVALID_KEY };
    }
    const hashHex = sha256Hex(apiKey);
    const hit = deps.cache?.get(hashHex);
    if (hit) {
      touchLater(hit.keyId);
      return hit.profile;
    }
    const hash = Buffer.from(hashHex, 'hex');
    const candidates = await keysRepo.findByPrefix(db.kysely, apiKey.slice(0, LIMITS.apiKeyPrefixLength));
    // compare against every candidate (no early exit), each in constant time
    let match: (typeof candidates)[number] | undefined;
    for (const c of candidates) if (c.key_hash && timingSafeEqual(c.key_hash, hash) && !match) match = c;
    if (!match) return { valid: false, error: INVALID_KEY };
    // the first use in a minute is written before answering (so lastUsed is never behind by
    // more than a minute, whichever process answers), later ones not at all
    const t = now();
    if (!match.last_used_at || t - match.last_used_at.getTime() >= TOUCH_EVERY_MS) {
      await keysRepo.touch(db.kysely, match.id);
      touched.set(match.id, t);
    }
    const effectivePlan = isAdminUser(config, match) ? 'network' : match.plan;
    const found: AuthenticatedKey = {
      valid: true,
      profile: {
        valid: true,
        userId: match.user_id,
        email: match.email,
        plan: match.plan,
        subscriptionStatus: match.subscription_status,
        features: [...PLAN_FEATURES[effectivePlan]],
      },
      key: {
        id: match.id,
        agentIds: match.agent_scoped ? match.agent_ids : null,
        monthlyBudgetUsd: match.monthly_budget_usd === null ? null : Number(match.monthly_budget_usd),
        rateLimitPerMinute: match.rate_limit_per_minute,
      },
    };
    deps.cache?.set(hashHex, { keyId: match.id, userId: match.user_id, profile: found, expiresAt: match.ends_at?.getTime() ?? null });
    return found;
  }

  return {
    async list(userId: string): Promise<ApiKeySummary[]> {
      const t = now();
      return (await db.withUser(userId, (trx) => keysRepo.list(trx, userId, monthOf(new Date(t))))).map((r) => toSummary(r, t));
    },

    /** 404 for an unknown id, a malformed id and another user's key alike. */
    async get(userId: string, id: string): Promise<ApiKeySummary> {
      if (!UUID_PATTERN.test(id)) throw notFoundKey();
      return read(userId, id);
    },

    /**
     * §4.3 POST /api/keys, with the key's limits (docs/payments.md "API keys"): the raw key is in
     * this result and nowhere else, ever.
     */
    async create(userId: string, rawName: string, limits: KeyLimitsRequest = {}) {
      const name = checkedName(rawName);
      const secret = newSecret();
      const row = await db.withUser(userId, async (trx) =>
        keysRepo.insert(trx, { userId, name, prefix: secret.prefix, keyHash: secret.keyHash, ...(await checkedLimits(trx, limits)) }),
      );
      const summary = await read(userId, row.id);
      return { ...summary, key: secret.key };
    },

    /**
     * Changes a key's name or limits (a field left out stays, null removes a limit). Applies at
     * once in this process and, through the cache's eviction, in every replica.
     */
    async update(userId: string, id: string, change: KeyLimitsRequest & { name?: string | undefined }): Promise<ApiKeySummary> {
      if (!UUID_PATTERN.test(id)) throw notFoundKey();
      const name = change.name === undefined ? undefined : checkedName(change.name);
      await db.withUser(userId, async (trx) => {
        if (!(await keysRepo.update(trx, userId, id, { name, ...(await checkedLimits(trx, change)) }))) throw notFoundKey();
      });
      deps.cache?.evictKey(id);
      return read(userId, id);
    },

    /**
     * A new secret for the key (answered once, as at creation); the old secret keeps working for
     * `graceSeconds` (default LIMITS.apiKeyRollGraceDefaultSeconds), then is refused like a deleted
     * key. Its limits, usage and id stay.
     */
    async roll(userId: string, id: string, graceSeconds: number = LIMITS.apiKeyRollGraceDefaultSeconds) {
      if (!UUID_PATTERN.test(id)) throw notFoundKey();
      if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > LIMITS.apiKeyRollGraceMaxSeconds)
        throw badRequest(`graceSeconds: must be a whole number from 0 to ${LIMITS.apiKeyRollGraceMaxSeconds}`);
      const secret = newSecret();
      const row = await db.withUser(userId, (trx) =>
        keysRepo.roll(trx, userId, id, { prefix: secret.prefix, keyHash: secret.keyHash, graceSeconds }),
      );
      if (!row) throw notFoundKey();
      // the cached old secret is dropped, so its next use is checked against its grace
      deps.cache?.evictKey(id);
      return { ...(await read(userId, id)), key: secret.key };
    },

    async remove(userId: string, id: string): Promise<void> {
      if (!UUID_PATTERN.test(id)) throw notFoundKey();
      if (!(await db.withUser(userId, (trx) => keysRepo.delete(trx, userId, id)))) throw notFoundKey();
      // a deleted key stops validating at once here and, through Redis, in every replica
      deps.cache?.evictKey(id);
    },

    /**
     * Deletes every key of the user (an account taken back by its address's owner, docs/identity.md
     * "Accounts registered before the owner signed in"): they stop validating at once here and,
     * through Redis, in every replica.
     */
    async removeAll(userId: string): Promise<number> {
      const n = await db.withUser(userId, (trx) => keysRepo.deleteAllOf(trx, userId));
      deps.cache?.evictUser(userId);
      return n;
    },

    authenticate,

    /** §4.3 validation: the owner's profile of a valid key (authenticate, without the key's limits). */
    async validate(apiKey: string): Promise<KeyValidation> {
      const r = await authenticate(apiKey);
      return r.valid ? r.profile : r;
    },

    /**
     * Counts one request of a key with a rate limit of its own (per key id, whichever of its
     * secrets was used); 429 KEY_RATE_LIMITED with `retryAfter` (seconds) past it. A limiter
     * outage lets the request through rather than failing it. Undefined when nothing is to wait for.
     */
    rateLimit(key: KeyLimits): Promise<void> | undefined {
      const max = key.rateLimitPerMinute;
      if (max === null || !deps.rateLimiter) return undefined;
      const refuse = (d: RateDecision) => {
        if (d.allowed) return;
        const retryAfter = Math.max(1, Math.ceil(d.retryAfterMs / 1000));
        throw new AppError(
          'KEY_RATE_LIMITED',
          `This API key may make ${max} request${max === 1 ? '' : 's'} a minute, and has: retry in ${retryAfter} s, ` +
            'or raise its rate limit on the Keys page.',
          { retryAfter, rateLimitPerMinute: max },
        );
      };
      const now = deps.rateLimiter.consumeNow?.(`api-key:${key.id}`, max, RATE_WINDOW_MS);
      if (now) {
        refuse(now);
        return undefined;
      }
      return deps.rateLimiter.consume(`api-key:${key.id}`, max, RATE_WINDOW_MS).then(refuse, () => undefined);
    },
  };
}

export type KeysService = ReturnType<typeof createKeysService>;
