/**
 * Password reset by email. §4.18 lists the endpoints as "not shown"; this is our design
 * (docs/security.md "Password reset", the OpenAPI description of /api/auth/password-reset/*):
 *
 * - request: answers the same 200 whether or not the email has an account. Everything that
 *   depends on the account (the lookup, the token row, the SMTP conversation) runs after the
 *   answer, so neither the body nor the timing tells an account exists. Limited per IP and per
 *   (email, IP) through the shared rate limiter (Redis with REDIS_URL, so the limits hold across
 *   replicas): a caller's requests count against that caller only, so nobody can use up someone
 *   else's resets. What keeps a mailbox from being flooded is the mail itself: an account is
 *   mailed a new link at most once every 10 minutes (LIMITS.passwordResetResendMs); a request in
 *   between answers the same 200 and mails nothing, and the link mailed before is still live (30
 *   minutes), in the same mailbox. Accounts with a password get mail, and so do accounts whose
 *   address a provider proved (the mailbox is the prover's: this is how an identity-provider user
 *   sets a password, e.g. after the first proof cleared a stranger's); wallet accounts get none.
 * - the mail holds `${PUBLIC_URL}/reset-password?token=…`: 256 random bits, valid 30 minutes
 *   (LIMITS.passwordResetTokenTtlMs), single use, stored only as its SHA-256.
 * - confirm: the §4.1 sign-up password rules; one UPDATE spends the token (concurrent confirms:
 *   exactly one wins); the new argon2id hash, every other link of the user spent and every session
 *   deleted in the same transaction; then the session caches of every replica are evicted.
 */
import { hash as argonHash } from '@node-rs/argon2';
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { randomToken, sha256, sha256Hex } from '../../lib/crypto.ts';
import { AppError, badRequest, tooManyRequests } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import type { RateLimiter } from '../../lib/rate-limiter.ts';
import type { Mailer } from './mailer.client.ts';
import { COMMON_PASSWORD_MESSAGE, isCommonPassword } from './password-policy.rules.ts';
import { passwordResetRepo as repo } from './password-reset.repo.ts';

// argon2id (OWASP), as at sign-up; @node-rs/argon2's Algorithm enum is a const enum, so by value
const ARGON2ID = 2;

export const RESET_NOT_SET_UP =
  'Password reset by email is not set up on this server: ask its operator for a password reset link (they can make one for your account).';
export const RESET_REQUESTED =
  'If an account uses this email, a link to set a new password is on its way. It works once, within 30 minutes. ' +
  'A new link is mailed at most once every 10 minutes: if one came a moment ago, use that one.';
export const RESET_TOKEN_ERRORS = {
  unknown: 'This password reset link is not valid. Request a new one.',
  used: 'This password reset link has already been used. Request a new one.',
  expired: 'This password reset link has expired. Request a new one.',
} as const;

/**
 * How long a link an admin issues works (docs/admin.md "A password reset link without email"):
 * longer than a mailed one, because the admin passes it on by hand.
 */
export const ADMIN_RESET_LINK_TTL_MS = 24 * 60 * 60 * 1000;

/** A spent or expired link is kept this long after its expiry, so a late click is told why it failed. */
const KEEP_EXPIRED_MS = 24 * 60 * 60 * 1000;

export type PasswordResetDeps = {
  db: Db;
  config: Pick<Config, 'PUBLIC_URL' | 'PASSWORD_RESET_RATE_LIMIT' | 'PASSWORD_RESET_EMAIL_RATE_LIMIT'>;
  /** undefined: no SMTP_URL, the request answers 503 */
  mailer: Mailer | undefined;
  rateLimiter: RateLimiter;
  /** ends every session of a user in every replica's cache (accounts.revokeAllSessions) */
  revokeAllSessions(userId: string): Promise<void>;
  logger: Logger;
  now?: () => Date;
};

export function createPasswordResetService(deps: PasswordResetDeps) {
  const { db, config } = deps;
  const now = deps.now ?? (() => new Date());
  // mails being prepared or sent after their request was answered (idle() waits for them)
  const pending = new Set<Promise<void>>();

  const idle = async () => {
    while (pending.size > 0) await Promise.allSettled([...pending]);
  };

  const limited = async (key: string, limit: number) => {
    const d = await deps.rateLimiter.consume(key, limit, LIMITS.passwordResetWindowMs);
    if (!d.allowed)
      throw tooManyRequests('Too many password reset requests; try again later', {
        retryAfter: Math.max(1, Math.ceil(d.retryAfterMs / 1000)),
      });
  };

  async function mailLink(mailer: Mailer, email: string): Promise<void> {
    const user = await repo.findUserByEmail(db.kysely, email);
    // a wallet account's address is a pseudo-address nobody proved: nothing to mail
    if (!user || (!user.has_password && !user.email_verified)) return;
    const token = randomToken(32);
    const tokenHash = sha256(token);
    const at = now().getTime();
    const created = await db.kysely.transaction().execute(async (trx) => {
      await repo.lockUser(trx, user.id);
      // a link mailed less than passwordResetResendMs ago expires later than this: it is still live, in
      // the same mailbox. One expiring well after any mailed link could (an admin's, 24 h) was never
      // mailed and does not count; "well after" leaves room for a request that took its time `at`
      // before it queued on the lock behind the one that mailed.
      const recent = new Date(at + LIMITS.passwordResetTokenTtlMs - LIMITS.passwordResetResendMs);
      const latest = new Date(at + LIMITS.passwordResetTokenTtlMs + LIMITS.passwordResetResendMs);
      if (await repo.hasLiveLinkExpiringBetween(trx, user.id, recent, latest)) return false;
      await repo.insertToken(trx, { userId: user.id, tokenHash, expiresAt: new Date(at + LIMITS.passwordResetTokenTtlMs) });
      return true;
    });
    if (!created) return;
    const link = `${config.PUBLIC_URL}/reset-password?token=${token}`;
    const host = new URL(config.PUBLIC_URL).host;
    const what = user.has_password ? 'reset the password of' : 'set a password for';
    try {
      await mailer.send({
        to: user.email,
        subject: user.has_password ? 'Reset your password' : 'Set a password',
        text:
          `Someone, hopefully you, asked to ${what} the account ${user.email} on ${host}.\n\n` +
          `Set a new password here (the link works once, within 30 minutes):\n${link}\n\n` +
          'Setting it signs you out everywhere. If you did not ask for this, ignore this email: nothing changes.\n',
      });
    } catch (err) {
      // unsent: the next request must not wait out the resend interval for a link nobody has
      await repo.deleteToken(db.kysely, tokenHash).catch(() => {});
      throw err;
    }
  }

  return {
    /** Whether the request can send mail (GET /api/features `passwordReset`). */
    available: deps.mailer !== undefined,

    /** POST /api/auth/password-reset/request. Resolves once the request is accepted, before any mail work. */
    async request(rawEmail: string, meta: { ip: string }): Promise<void> {
      const mailer = deps.mailer;
      // not configured is the operator's choice: one calm log line, no stack (error-handler.ts)
      if (!mailer) throw new AppError('PASSWORD_RESET_NOT_CONFIGURED', RESET_NOT_SET_UP);
      const email = rawEmail.trim().toLowerCase();
      await limited(`pwreset:ip:${meta.ip}`, config.PASSWORD_RESET_RATE_LIMIT);
      // Per address *and caller*: a count of everyone's requests for one address would let anyone
      // use up its owner's resets. Keyed by the email's hash: the limiter's store (Redis) holds no address.
      await limited(`pwreset:email-ip:${sha256Hex(email)}:${meta.ip}`, config.PASSWORD_RESET_EMAIL_RATE_LIMIT);
      const work = mailLink(mailer, email)
        // err.message only: never the message, whose text holds the link
        .catch((err: Error) => deps.logger.warn({ error: err.message }, 'password reset mail not sent'))
        .finally(() => pending.delete(work));
      pending.add(work);
    },

    /** POST /api/auth/password-reset/confirm: sets the new password and ends every session of the user. */
    async confirm(token: string, password: string): Promise<{ userId: string }> {
      const tokenHash = sha256(token);
      // cheap checks first: an unknown or spent token costs no argon2 hash
      const row = await repo.findToken(db.kysely, tokenHash);
      if (!row) throw badRequest(RESET_TOKEN_ERRORS.unknown);
      if (row.used_at) throw badRequest(RESET_TOKEN_ERRORS.used);
      if (row.expires_at.getTime() <= now().getTime()) throw badRequest(RESET_TOKEN_ERRORS.expired);
      if (await isCommonPassword(password)) throw badRequest(COMMON_PASSWORD_MESSAGE);
      const passwordHash = await argonHash(password, { algorithm: ARGON2ID });
      const userId = await db.kysely.transaction().execute(async (trx) => {
        const at = now();
        const spent = await repo.spendToken(trx, tokenHash, at);
        if (!spent) return undefined; // a concurrent confirm spent it first
        await repo.setPasswordHash(trx, spent.user_id, passwordHash);
        await repo.spendAllOf(trx, spent.user_id, at);
        await repo.deleteSessionsOfUser(trx, spent.user_id);
        return spent.user_id;
      });
      if (!userId) throw badRequest(RESET_TOKEN_ERRORS.used);
      // the rows are gone; now every replica's session cache (and open streams) forget them too
      await deps.revokeAllSessions(userId);
      return { userId };
    },

    /** Purge job: forgets links a day past their expiry. */
    async purgeExpired(): Promise<number> {
      const r = await repo.deleteExpired(db.kysely, new Date(now().getTime() - KEEP_EXPIRED_MS));
      return Number(r.numDeletedRows);
    },

    /** Resolves when every accepted request's mail work has finished (tests, shutdown). */
    idle,

    async close(): Promise<void> {
      await idle();
      await deps.mailer?.close();
    },
  };
}

export type PasswordResetService = ReturnType<typeof createPasswordResetService>;

/**
 * A password reset link an admin issues and hands over, for a server without SMTP (or a user whose
 * mail does not arrive): `npm run admin -- reset-link <email>` and POST
 * /api/admin/users/:id/reset-link (docs/admin.md). The same links as the mailed ones (256 random
 * bits, single use, stored only as a hash, confirmed by POST /api/auth/password-reset/confirm),
 * valid ADMIN_RESET_LINK_TTL_MS; issuing one spends the user's earlier links, so only the newest
 * works. A wallet account (no password and no proved address) has no password to reset: 409.
 */
export function createAdminResetLinks(deps: { db: Db; publicUrl: string; now?: () => Date }) {
  const now = deps.now ?? (() => new Date());
  return {
    async issue(userId: string): Promise<{ link: string; email: string; expiresAt: string }> {
      const token = randomToken(32);
      const at = now();
      const expiresAt = new Date(at.getTime() + ADMIN_RESET_LINK_TTL_MS);
      const email = await deps.db.kysely.transaction().execute(async (trx) => {
        const user = await repo.lockUserWithFacts(trx, userId);
        if (!user) throw new AppError('NOT_FOUND', 'User not found');
        if (!user.has_password && !user.email_verified)
          throw new AppError('CONFLICT', 'This account signs in with a wallet: it has no password to reset');
        await repo.spendAllOf(trx, userId, at);
        await repo.insertToken(trx, { userId, tokenHash: sha256(token), expiresAt });
        return user.email;
      });
      return { link: `${deps.publicUrl}/reset-password?token=${token}`, email, expiresAt: expiresAt.toISOString() };
    },
  };
}
