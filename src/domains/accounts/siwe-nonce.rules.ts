/**
 * Stateless SIWE nonces (§4.1 GET|POST /api/auth/nonce; §5 leaves lifetime and single use "not
 * shown"). Issuing writes nothing: a nonce carries its own expiry and an HMAC over it, so a
 * client asking for nonces in a loop costs the server one HMAC each and no database row.
 * Single use is recorded only when a nonce is spent at sign-in (accounts.repo.ts `spendNonce`),
 * and those rows are purged by a job once the nonce has expired (docs/security.md).
 *
 * Format, alphanumeric as EIP-4361 requires: 32 hex random | 8 hex masked expiry | 32 hex
 * HMAC-SHA-256 (truncated to 128 bits) of the first two parts, under keys derived from
 * SECRETS_ENCRYPTION_KEY. The expiry (Unix seconds) is XORed with a keyed function of the random
 * part: a plain expiry would be the same 8 characters in every nonce issued in one second, so
 * nonces would share a substring and tell the issue time (the §4.1 test checks that consecutive
 * nonces share no 12-character window).
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

const NONCE = /^([0-9a-f]{32})([0-9a-f]{8})([0-9a-f]{32})$/;

export type NonceCheck = { ok: true; expiresAt: Date } | { ok: false };

/** `secret` is a 32-byte master key; the HMAC key is derived from it for this one purpose. */
export function createNonceMinter(secret: Buffer, ttlMs: number) {
  const key = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), 'siwe-nonce-v1', 32));
  const maskKey = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), 'siwe-nonce-mask-v1', 32));
  const mac = (body: string) => createHmac('sha256', key).update(body).digest().subarray(0, 16);
  const mask = (random: string) => createHmac('sha256', maskKey).update(random).digest().readUInt32BE(0);

  return {
    issue(now: Date): string {
      const random = randomBytes(16).toString('hex');
      const expiry = (Math.ceil((now.getTime() + ttlMs) / 1000) ^ mask(random)) >>> 0;
      const body = random + expiry.toString(16).padStart(8, '0');
      return body + mac(body).toString('hex');
    },

    /** Authentic and not expired; whether it was already spent is the database's answer. */
    check(nonce: string, now: Date): NonceCheck {
      const m = NONCE.exec(nonce);
      if (!m) return { ok: false };
      const given = Buffer.from(m[3]!, 'hex');
      if (!timingSafeEqual(given, mac(m[1]! + m[2]!))) return { ok: false };
      const expiresAt = new Date(((parseInt(m[2]!, 16) ^ mask(m[1]!)) >>> 0) * 1000);
      return expiresAt.getTime() > now.getTime() ? { ok: true, expiresAt } : { ok: false };
    },
  };
}
