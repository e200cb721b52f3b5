/**
 * The gateway auth rate limit of §8: 10 failed attempts per 60,000 ms window per client IP, then
 * a 300,000 ms lockout during which every request from that IP gets 429 (even with the right
 * token: a locked-out client must not keep guessing). Loopback clients are exempt, so the
 * platform's own probes and a local operator are never locked out; behind the container's TCP
 * proxy the client IP comes from X-Forwarded-For (trusted proxy 127.0.0.1), so the exemption does
 * not leak to remote clients. In-process state: an agent is one process.
 */
import { LIMITS } from '../config/limits.ts';

export type AuthGuardOptions = {
  maxFailures?: number;
  windowMs?: number;
  lockoutMs?: number;
  loopbackExempt?: boolean;
  now?: () => number;
};

export const isLoopback = (ip: string): boolean =>
  ip === '::1' || ip.startsWith('127.') || ip.startsWith('::ffff:127.') || ip === 'localhost';

export function createAuthGuard(options: AuthGuardOptions = {}) {
  const maxFailures = options.maxFailures ?? LIMITS.gatewayAuthMaxFailures;
  const windowMs = options.windowMs ?? LIMITS.gatewayAuthWindowMs;
  const lockoutMs = options.lockoutMs ?? LIMITS.gatewayAuthLockoutMs;
  const loopbackExempt = options.loopbackExempt ?? true;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { failures: number; windowStart: number; lockedUntil: number }>();

  const exempt = (ip: string) => loopbackExempt && isLoopback(ip);

  return {
    /** ms left of a lockout for `ip`, or 0 when it may try. */
    lockedFor(ip: string): number {
      if (exempt(ip)) return 0;
      const e = entries.get(ip);
      if (!e) return 0;
      const left = e.lockedUntil - now();
      if (left > 0) return left;
      if (e.lockedUntil !== 0) entries.delete(ip); // lockout over: a fresh window
      return 0;
    },
    /** Records one failed attempt; returns true when this failure started a lockout. */
    fail(ip: string): boolean {
      if (exempt(ip)) return false;
      const t = now();
      let e = entries.get(ip);
      if (!e || t - e.windowStart >= windowMs) {
        e = { failures: 0, windowStart: t, lockedUntil: 0 };
        entries.set(ip, e);
      }
      e.failures += 1;
      if (e.failures >= maxFailures) {
        e.lockedUntil = t + lockoutMs;
        return true;
      }
      return false;
    },
    /** Drops entries whose window and lockout are over (called from a timer). */
    sweep(): void {
      const t = now();
      for (const [ip, e] of entries) if (e.lockedUntil <= t && t - e.windowStart >= windowMs) entries.delete(ip);
    },
  };
}

/**
 * The gateway token check in constant time: both sides hashed first, so neither the token's
 * content nor its length leaks through timing (as src/lib/crypto.ts safeEqual does). node:crypto
 * is loaded by the first request that needs it, not at start (~3 MB an agent that is only probed
 * would hold for nothing), and the token's own digest is computed once.
 */
export function tokenMatcher(token: string): (presented: string) => boolean {
  let expected: Buffer | undefined;
  return (presented) => {
    const { hash, timingSafeEqual } = process.getBuiltinModule('node:crypto');
    expected ??= hash('sha256', token, 'buffer');
    return timingSafeEqual(expected, hash('sha256', presented, 'buffer'));
  };
}
