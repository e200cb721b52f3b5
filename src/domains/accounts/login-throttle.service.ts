/**
 * Failed sign-in limits (docs/security.md "Password sign-in"). Three fixed-window counters of
 * failed attempts, shared through Redis when REDIS_URL is set (src/lib/rate-limiter.ts):
 *
 * - per account and client IP (tight, LOGIN_FAILURE_LIMIT): stops one client guessing one
 *   account's password, and locks out only that client, never the owner elsewhere;
 * - per client IP (LOGIN_IP_FAILURE_LIMIT): stops one client spraying many accounts;
 * - per account from everywhere (loose, LOGIN_ACCOUNT_FAILURE_LIMIT): slows a distributed guess.
 *   So that an attacker cannot use it to lock the owner out, an IP that already holds a live
 *   session of that account is exempt from it.
 *
 * An attempt is counted before the password is checked (an atomic increment, so a burst of
 * parallel guesses cannot all pass a check-then-count race) and taken back when it succeeds; a
 * success also clears the account+IP counter. A lockout lasts at most the rest of the window
 * (LOGIN_FAILURE_WINDOW_MS) and is answered 429 with `Retry-After`.
 */
import { createHash } from 'node:crypto';
import type { RateLimiter } from '../../lib/rate-limiter.ts';

export type LoginThrottleConfig = {
  LOGIN_FAILURE_LIMIT: number;
  LOGIN_IP_FAILURE_LIMIT: number;
  LOGIN_ACCOUNT_FAILURE_LIMIT: number;
  LOGIN_FAILURE_WINDOW_MS: number;
};

export type LoginAttempt = {
  /** the account-wide limit is exceeded: allowed only if this IP has a live session of the account */
  accountLimited: boolean;
  /** `retryAfterMs` when the attempt is refused outright (per IP or per account+IP) */
  refusedForMs: number | undefined;
  accountRetryAfterMs: number;
  succeeded(): Promise<void>;
  /**
   * The attempt never reached the password check because the platform failed (database down):
   * its counts are taken back, so an outage does not lock people out as if they had guessed.
   */
  abandoned(): Promise<void>;
};

export function createLoginThrottle(limiter: RateLimiter, config: LoginThrottleConfig) {
  const window = config.LOGIN_FAILURE_WINDOW_MS;
  // emails are hashed in the keys: Redis need not hold who tried to sign in
  const account = (email: string) => createHash('sha256').update(email.trim().toLowerCase()).digest('base64url').slice(0, 32);

  return {
    /** Counts one attempt against all three counters; the caller checks the password next. */
    async attempt(email: string, ip: string): Promise<LoginAttempt> {
      const acct = account(email);
      const keys = { pair: `login:pair:${acct}:${ip}`, ip: `login:ip:${ip}`, acct: `login:acct:${acct}` };
      const [pair, perIp, perAcct] = await Promise.all([
        limiter.consume(keys.pair, config.LOGIN_FAILURE_LIMIT, window),
        limiter.consume(keys.ip, config.LOGIN_IP_FAILURE_LIMIT, window),
        limiter.consume(keys.acct, config.LOGIN_ACCOUNT_FAILURE_LIMIT, window),
      ]);
      const refused = [pair, perIp].filter((d) => !d.allowed);
      return {
        accountLimited: !perAcct.allowed,
        refusedForMs: refused.length > 0 ? Math.max(...refused.map((d) => d.retryAfterMs)) : undefined,
        accountRetryAfterMs: perAcct.retryAfterMs,
        async succeeded() {
          await Promise.all([limiter.reset(keys.pair), limiter.release(keys.ip), limiter.release(keys.acct)]);
        },
        async abandoned() {
          await Promise.all([limiter.release(keys.pair), limiter.release(keys.ip), limiter.release(keys.acct)]);
        },
      };
    },
  };
}
