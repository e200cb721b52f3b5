/**
 * Secrets at rest and in comparison (docs/architecture.md rule 6): SHA-256 for tokens and API keys,
 * AES-256-GCM for secrets that must be read back, constant-time comparison everywhere.
 */
import { createCipheriv, createDecipheriv, hash, randomBytes, timingSafeEqual } from 'node:crypto';

// One-shot crypto.hash: no Hash object per call (these run on every authenticated request).
// Asking it for a string is ~3x faster than asking for a Buffer (Node 24: 0.33-0.41 us against
// 1.18 us for a 43-character token; the 'buffer' output takes a slow encoding check and a
// natively allocated Buffer), so sha256 takes the digest as latin1 text (one char per byte) and
// copies it into a pooled Buffer. test/lib/crypto.test.ts checks the bytes match.
export const sha256 = (value: string): Buffer => Buffer.from(hash('sha256', value, 'latin1'), 'latin1');
export const sha256Hex = (value: string): string => hash('sha256', value, 'hex');
/** The digest as base64url text: the session cache's key (accounts.service.ts). */
export const sha256Base64url = (value: string): string => hash('sha256', value, 'base64url');

/** A random token of `bytes` bytes from the CSPRNG, base64url-encoded. */
export const randomToken = (bytes = 32): string => randomBytes(bytes).toString('base64url');

/**
 * Constant-time string comparison. Both sides are hashed first so neither the content nor the
 * length of the secret leaks through timing (timingSafeEqual itself requires equal lengths).
 */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(sha256(a), sha256(b));
}

/**
 * `safeEqual` against a fixed secret whose hash is computed once: the per-request check (the
 * backend's bearer key) hashes only what the caller sent.
 */
export function secretMatcher(secret: string): (candidate: string) => boolean {
  const expected = sha256(secret);
  return (candidate) => timingSafeEqual(sha256(candidate), expected);
}

/** Parses a 32-byte key given as 64 hex chars or base64/base64url; throws on anything else. */
export function parseKey(value: string): Buffer {
  const v = value.trim();
  const buf = /^[0-9a-fA-F]{64}$/.test(v) ? Buffer.from(v, 'hex') : Buffer.from(v, 'base64');
  if (buf.length !== 32) throw new Error('key must be 32 bytes (64 hex characters or base64)');
  return buf;
}

const VERSION = 'v1';

/** AES-256-GCM; output `v1.<iv>.<tag>.<ciphertext>` (base64url parts), so the format can evolve. */
export function encryptSecret(key: Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return [VERSION, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
}

export function decryptSecret(key: Buffer, sealed: string): string {
  const [version, iv, tag, ct] = sealed.split('.');
  if (version !== VERSION || !iv || !tag || ct === undefined) throw new Error('unrecognised sealed secret');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
}
