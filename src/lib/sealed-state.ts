/**
 * The state of a browser's round trip through an OAuth provider (sign-in, §4.1; calendar connect,
 * §4.6), kept between the redirect and the callback in a short-lived HttpOnly cookie: encrypted
 * and authenticated (AES-256-GCM, ./crypto.ts) under a key derived from the platform's secret with
 * HKDF under the caller's own label, so a cookie of one flow never opens as another's, and a
 * forged, altered or expired one opens as nothing. The cookie binds the flow to the browser that
 * started it: a callback URL opened in another browser has no cookie to match. Callers clear the
 * cookie on the callback (one cookie, one attempt).
 */
import { hkdfSync } from 'node:crypto';
import { decryptSecret, encryptSecret } from './crypto.ts';

/** Longer than any state this seals: a bigger cookie is refused before it is decrypted. */
const MAX_SEALED_LENGTH = 2048;

export function createStateSealer<T extends object>(secret: Buffer, options: { label: string; ttlMs: number; now?: () => number }) {
  const key = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), options.label, 32));
  const now = options.now ?? Date.now;
  return {
    /** The cookie value: `value` and its expiry, `ttlMs` from now. */
    seal(value: T): string {
      return encryptSecret(key, JSON.stringify({ ...value, expiresAt: now() + options.ttlMs }));
    },
    /** What `seal` sealed, or null: missing, too long, forged, altered, another label's, expired. */
    open(sealed: string | undefined): (T & { expiresAt: number }) | null {
      if (!sealed || sealed.length > MAX_SEALED_LENGTH) return null;
      let value: unknown;
      try {
        value = JSON.parse(decryptSecret(key, sealed));
      } catch {
        return null;
      }
      if (value === null || typeof value !== 'object') return null;
      const expiresAt = (value as { expiresAt?: unknown }).expiresAt;
      if (typeof expiresAt !== 'number' || !(expiresAt > now())) return null;
      return value as T & { expiresAt: number };
    },
  };
}
