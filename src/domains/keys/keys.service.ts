/**
 * User API keys (§2 "API key", §4.3). A key is `sk_` plus 40 base64url characters (240 bits from
 * the CSPRNG). Only its SHA-256 and its first 10 characters (the lookup prefix, shown to the owner
 * as `keyPreview`) are stored; the raw key is returned once, by `create`.
 *
 * Validation follows §4.3: look up by the first 10 characters (one indexed query), compare the
 * SHA-256 of the presented key with each candidate's in constant time, return the owner's profile.
 * A plain SHA-256 (not a slow password hash) is right here: the key has 240 bits of entropy, so
 * there is nothing to brute-force, and verification stays one hash and one query.
 */

import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { sha256, sha256Hex } from '../../lib/crypto.ts';
import { badRequest, notFound } from '../../lib/errors.ts';
import type { KeyCache } from '../../lib/evicting-cache.ts';
import { UUID_PATTERN } from '../../lib/ids.ts';
import { isAdminUser } from '../accounts/index.ts';
import { keysRepo } from './keys.repo.ts';

export const API_KEY_PREFIX = 'sk_';
/** 30 random bytes → 40 base64url characters. */
const KEY_RANDOM_BYTES = 30;

export type ApiKeySummary = { id: string; name: string; keyPreview: string; createdAt: string; lastUsed: string | null };
export type KeyProfile = { valid: true; userId: string; email: string; plan: string; subscriptionStatus: string; features: string[] };
export type KeyValidation = KeyProfile | { valid: false; error: string };

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

const toSummary = (r: { id: string; name: string; prefix: string; created_at: Date; last_used_at: Date | null }): ApiKeySummary => ({
  id: r.id,
  name: r.name,
  keyPreview: r.prefix,
  createdAt: r.created_at.toISOString(),
  lastUsed: r.last_used_at ? r.last_used_at.toISOString() : null,
});

export type KeysDeps = {
  db: Db;
  config: Pick<Config, 'ADMIN_EMAILS' | 'ADMIN_EMAILS_REQUIRE_VERIFIED'>;
  /** verified keys (src/lib/evicting-cache.ts); without one every validation reads the database */
  cache?: KeyCache<KeyProfile>;
  now?: () => number;
};

/** `lastUsed` is written at most this often per key (off the hot path: a minute is its resolution). */
const TOUCH_EVERY_MS = 60_000;

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

  return {
    async list(userId: string): Promise<ApiKeySummary[]> {
      return (await db.withUser(userId, (trx) => keysRepo.list(trx, userId))).map(toSummary);
    },

    /** 404 for an unknown id, a malformed id and another user's key alike. */
    async get(userId: string, id: string): Promise<ApiKeySummary> {
      if (!UUID_PATTERN.test(id)) throw notFound('API key not found');
      const row = await db.withUser(userId, (trx) => keysRepo.find(trx, userId, id));
      if (!row) throw notFound('API key not found');
      return toSummary(row);
    },

    /** §4.3 POST /api/keys: the raw key is in this result and nowhere else, ever. */
    async create(userId: string, rawName: string) {
      const name = rawName.trim();
      if (!name) throw badRequest('Name required');
      if (name.length > LIMITS.apiKeyNameMax) throw badRequest(`Name must be at most ${LIMITS.apiKeyNameMax} characters`);
      const key = API_KEY_PREFIX + randomBytes(KEY_RANDOM_BYTES).toString('base64url');
      const row = await db.withUser(userId, (trx) =>
        keysRepo.insert(trx, { userId, name, prefix: key.slice(0, LIMITS.apiKeyPrefixLength), keyHash: sha256(key) }),
      );
      return { id: row.id, name: row.name, key, createdAt: row.created_at.toISOString() };
    },

    async remove(userId: string, id: string): Promise<void> {
      if (!UUID_PATTERN.test(id)) throw notFound('API key not found');
      if (!(await db.withUser(userId, (trx) => keysRepo.delete(trx, userId, id)))) throw notFound('API key not found');
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

    /**
     * §4.3 validation flow. The caller has checked that `apiKey` is a string starting `sk_`.
     * An invalid key is an expected outcome, returned as a value (docs/architecture.md rule 3). A valid one
     * counts as a use of the key: `lastUsed` is updated.
     */
    async validate(apiKey: string): Promise<KeyValidation> {
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
      for (const c of candidates) if (timingSafeEqual(c.key_hash, hash) && !match) match = c;
      if (!match) return { valid: false, error: INVALID_KEY };
      // the first use in a minute is written before answering (so lastUsed is never behind by
      // more than a minute, whichever process answers), later ones not at all
      const t = now();
      if (!match.last_used_at || t - match.last_used_at.getTime() >= TOUCH_EVERY_MS) {
        await keysRepo.touch(db.kysely, match.id);
        touched.set(match.id, t);
      }
      const effectivePlan = isAdminUser(config, match) ? 'network' : match.plan;
      const profile: KeyProfile = {
        valid: true,
        userId: match.user_id,
        email: match.email,
        plan: match.plan,
        subscriptionStatus: match.subscription_status,
        features: [...PLAN_FEATURES[effectivePlan]],
      };
      deps.cache?.set(hashHex, { keyId: match.id, userId: match.user_id, profile });
      return profile;
    },
  };
}

export type KeysService = ReturnType<typeof createKeysService>;
