/**
 * Per-agent credentials (docs/architecture.md rule 6, §8 gateway token size). Each agent gets its own gateway
 * token and its own platform key; a container never receives the platform's DATABASE_URL,
 * INTERNAL_API_KEY or WALLET_ENCRYPTION_KEY. §8 lists those among a container's environment; not
 * passing them is a deliberate improvement: one compromised agent cannot read every user's rows
 * or call the backend as the web app. The platform key is also the agent's model credential (§8
 * "model-router key"): the AI gateway takes it instead of a provider key (docs/agents.md "Model
 * access"). It is issued fresh at every deploy, revoked when the agent stops, and deleted with it.
 */
import { randomBytes } from 'node:crypto';
import { LIMITS } from '../../config/limits.ts';
import { randomToken, sha256 } from '../../lib/crypto.ts';

/** 48 hex characters from 24 random bytes (§8 "48 chars (24 bytes) from provisioning"). */
export function newGatewayToken(): string {
  const token = randomBytes(LIMITS.gatewayTokenLength / 2).toString('hex');
  return token;
}

/** Prefix marking a per-agent platform key, so a log scanner and a reader can tell it apart. */
export const PLATFORM_KEY_PREFIX = 'apk_';

/** A fresh per-agent platform key; only its SHA-256 is stored, with a short lookup prefix. */
export function newPlatformKey(): { key: string; hash: Buffer; prefix: string } {
  const key = PLATFORM_KEY_PREFIX + randomToken(32);
  return { key, hash: sha256(key), prefix: key.slice(0, 10) };
}

/** DNS-safe agent id: the first label of `<id>.<AGENTS_DOMAIN>` (002 checks `^[a-z0-9][a-z0-9-]{2,62}$`). */
export function newAgentId(): string {
  return `a${randomBytes(10).toString('hex')}`;
}
