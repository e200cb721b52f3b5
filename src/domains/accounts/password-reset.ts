/**
 * Password reset by email. §4.18 lists the endpoints as "not shown"; this is our design
 * (docs/security.md "Password reset", the OpenAPI description of /api/auth/password-reset/*):
 *
 * - request: answers the same 200 whether or not the email has an account. Everything that
 *   depends on the account (the lookup, the token row, the SMTP conversation) runs after the
 *   answer, so neither the body nor the timing tells an account exists. Limited per IP and per
 *   email through the shared rate limiter (Redis with REDIS_URL, so the limits hold across
 *   replicas). Accounts without a password (wallet sign-in, identity-provider sign-in) get no
 *   mail: they sign in the way they signed up.
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
import type { RateLimiter } from '../../lib/rate-limiter.ts';
import type { Mailer } from './mailer.ts';
import { COMMON_PASSWORD_MESSAGE, isCommonPassword } from './password-policy.ts';
import { passwordResetRepo as repo } from './password-reset.repo.ts';

// argon2id (OWASP), as at sign-up; @node-rs/argon2's Algorithm enum is a const enum, so by value
const ARGON2ID = 2;

export const RESET_NOT_SET_UP = 'Password reset by email is not set up on this server: ask its operator to reset your password.';
export const RESET_REQUESTED =
  'If an account with a password uses this email, a link to set a new password is on its way. It works once, within 30 minutes.';
export const RESET_TOKEN_ERRORS = {
  unknown: 'This password reset link is not valid. Request a new one.',
  used: 'This password reset link has already been used. Request a new one.',
  expired: 'This password reset link has expired. Request a new one.',
} as const;

/** A spent or expired link is kept this long after its expiry, so a late click is told why it failed. */
const KEEP_EXPIRED_MS = 24 * 60 * 60 * 1000;

type Log = { warn(obj: object, msg: string): void };

export type PasswordResetDeps = {
  db: Db;
  config: Pick<Config, 'PUBLIC_URL' | 'PASSWORD_RESET_RATE_LIMIT' | 'PASSWORD_RESET_EMAIL_RATE_LIMIT'>;
  /** undefined: no SMTP_URL, the request answers 503 */
  mailer: Mailer | undefined;
  rateLimiter: RateLimiter;
  /** ends every session of a user in every replica's cache (accounts.revokeAllSessions) */
  revokeAllSessions(userId: string): Promise<void>;
  logger: Log;
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
    if (!user?.has_password) return;
    const token = randomToken(32);
    await repo.insertToken(db.kysely, {
      userId: user.id,
      tokenHash: sha256(token),
      expiresAt: new Date(now().getTime() + LIMITS.passwordResetTokenTtlMs),
    });
    const link = `${config.PUBLIC_URL}/reset-password?token=${token}`;
    const host = new URL(config.PUBLIC_URL).host;
    await mailer.send({
      to: user.email,
      subject: 'Reset your password',
      text:
        `Someone, hopefully you, asked to reset the password of the account ${user.email} on ${host}.\n\n` +
        `Set a new password here (the link works once, within 30 minutes):\n${link}\n\n` +
        'Setting it signs you out everywhere. If you did not ask for this, ignore this email: your password stays as it is.\n',
    });
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
      // keyed by the email's hash: the limiter's store (Redis) holds no address
      await limited(`pwreset:email:${sha256Hex(email)}`, config.PASSWORD_RESET_EMAIL_RATE_LIMIT);
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
