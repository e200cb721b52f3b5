/**
 * The OAuth `state` of a calendar connection (§4.6: "HMAC-signed and valid 10 minutes", §8). It
 * carries the user who started the connection, so the callback (a public route the provider's
 * redirect lands on) knows whose connection it stores without trusting anything else in the URL:
 * `base64url(JSON {u: userId, e: expiry ms, n: nonce}) . base64url(HMAC-SHA256)`.
 *
 * The HMAC key is derived from the platform's secrets key with HKDF under its own label, so a
 * state cannot be forged from, or confused with, anything else that key protects. A valid state
 * alone connects nothing: the callback also wants the same browser (the sealed cookie set with the
 * state, `stateCookie` below), the same signed-in user, and a nonce not used before
 * (calendar.service.ts `callback`).
 */
import { createHmac, hkdfSync } from 'node:crypto';
import { LIMITS } from '../../config/limits.ts';
import { randomToken, safeEqual } from '../../lib/crypto.ts';
import { createStateSealer } from '../../lib/sealed-state.ts';

export type StateCheck =
  | { ok: true; userId: string; nonce: string; expiresAt: number }
  | { ok: false; reason: 'malformed' | 'bad_signature' | 'expired' };

/** The cookie that binds a state to the browser it was issued to; sent back only to the callback. */
export const CALENDAR_STATE_COOKIE = 'service-calendar-oauth';
export const CALENDAR_STATE_COOKIE_PATH = '/api/calendar/callback';

/**
 * The sealed cookie (src/lib/sealed-state.ts, under a label of its own) holding the state it was
 * issued with: the callback compares it with the URL's, so a link opened in any other browser has
 * nothing to match.
 */
export function createCalendarStateCookie(secretsKey: Buffer, now: () => number = Date.now) {
  const sealer = createStateSealer<{ state: string }>(secretsKey, {
    label: 'agent-platform calendar connect state v1',
    ttlMs: LIMITS.calendarStateTtlMs,
    now,
  });
  return {
    seal: (state: string) => sealer.seal({ state }),
    /** Whether `sealed` opens (ours, unexpired) and holds exactly `state`. */
    matches(sealed: string | undefined, state: string): boolean {
      const value = sealer.open(sealed);
      return value !== null && typeof value.state === 'string' && safeEqual(value.state, state);
    },
  };
}

export function createCalendarState(secretsKey: Buffer, now: () => number = Date.now) {
  const key = Buffer.from(hkdfSync('sha256', secretsKey, Buffer.alloc(0), 'calendar-oauth-state v1', 32));
  const sign = (payload: string) => createHmac('sha256', key).update(payload).digest('base64url');

  return {
    /** A fresh state for `userId`, valid LIMITS.calendarStateTtlMs. */
    issue(userId: string): string {
      const payload = Buffer.from(JSON.stringify({ u: userId, e: now() + LIMITS.calendarStateTtlMs, n: randomToken(16) })).toString(
        'base64url',
      );
      return `${payload}.${sign(payload)}`;
    },

    /** Signature first (constant time), then age; a negative outcome is a value (architecture rule 3). */
    verify(state: string): StateCheck {
      const [payload, mac, extra] = state.split('.');
      if (!payload || !mac || extra !== undefined) return { ok: false, reason: 'malformed' };
      if (!safeEqual(mac, sign(payload))) return { ok: false, reason: 'bad_signature' };
      let body: unknown;
      try {
        body = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      } catch {
        return { ok: false, reason: 'malformed' };
      }
      const { u, e, n } = (body ?? {}) as { u?: unknown; e?: unknown; n?: unknown };
      if (typeof u !== 'string' || typeof e !== 'number' || typeof n !== 'string' || n === '') return { ok: false, reason: 'malformed' };
      if (e <= now()) return { ok: false, reason: 'expired' };
      return { ok: true, userId: u, nonce: n, expiresAt: e };
    },
  };
}
