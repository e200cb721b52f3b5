/**
 * Accounts and sessions (§4.1): sign-up, password and wallet sign-in, database-backed sessions,
 * the current user and profile updates.
 * Length (~300 lines): the §4.1 flows share one session maker, the login throttle and the nonce minter; the
 * throttle, nonces, password policy and session cache already live in their own files.
 */

import { randomBytes } from 'node:crypto';
import { hash as argonHash, verify as argonVerify } from '@node-rs/argon2';
import type { Hex } from 'viem';
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { createBatchLoader } from '../../lib/batch-loader.ts';
import { randomToken, sha256, sha256Base64url } from '../../lib/crypto.ts';
import { badRequest, conflict, forbidden, notFound, serviceUnavailable, tooManyRequests, unauthorized } from '../../lib/errors.ts';
import type { SessionCache } from '../../lib/evicting-cache.ts';
import type { RateLimiter } from '../../lib/rate-limiter.ts';
import { accountsRepo } from './accounts.repo.ts';
import { isAdminUser } from './admin.rules.ts';
import type { BotVerifier } from './bot-verifier.client.ts';
import { createLoginThrottle, type LoginThrottleConfig } from './login-throttle.service.ts';
import type { ExternalProvider } from './oauth-state.rules.ts';
import { COMMON_PASSWORD_MESSAGE, isCommonPassword } from './password-policy.rules.ts';
import { createNonceMinter } from './siwe-nonce.rules.ts';
import { checkSiweMessage, SignatureServiceUnavailableError, type SignatureVerifier } from './siwe-verifier.client.ts';

// argon2id (OWASP); @node-rs/argon2's Algorithm enum is a const enum, so name it by value
const ARGON2ID = 2;
// A real argon2id hash of a random password, verified against when the email is unknown so a
// miss costs the same time as a hit (no user enumeration by timing).
const DUMMY_HASH = argonHash(randomBytes(16).toString('hex'), { algorithm: ARGON2ID });

/**
 * A one-time notice the dashboard shows after sign-in until dismissed (DELETE /api/auth/notice).
 * `password-cleared`: the first proof of the address by `provider` cleared a password set before
 * it (docs/identity.md "What a sign-in does").
 */
export type AccountNotice = { kind: 'password-cleared'; provider: ExternalProvider; message: string };
export type SessionUser = { id: string; name: string; email: string; isAdmin: boolean; notice?: AccountNotice };

const PROVIDER_NAMES: Record<ExternalProvider, string> = { idp: 'the identity provider', codehost: 'the code host' };

export function passwordClearedNotice(provider: ExternalProvider): AccountNotice {
  const by = PROVIDER_NAMES[provider];
  return {
    kind: 'password-cleared',
    provider,
    message:
      `Someone had registered this email with a password before you proved it with ${by}. That password no longer works ` +
      `and every session and API key made before has ended. Sign in with ${by}, or set a password of your own with a password ` +
      'reset (a link mailed to this address). If that registration was not yours, review the agents of this account: ' +
      'whoever registered it may have made them.',
  };
}
/**
 * What the session cache (src/lib/evicting-cache.ts) keeps of a session: its user as the session
 * answer shows it. `notice`: the provider whose first proof cleared a pre-registered password (a
 * one-time dashboard notice), or null.
 */
export type CachedSession = {
  id: string;
  name: string;
  email: string;
  isAdmin: boolean;
  notice?: ExternalProvider | null;
  expiresAt: number;
};
export type RequestMeta = { ip: string; userAgent: string | null };
export type NewSession = { token: string; expiresAt: Date; user: { id: string; name: string } };

const REFERRAL_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
export function newReferralCode(): string {
  const bytes = randomBytes(8);
  let out = '';
  for (const b of bytes) out += REFERRAL_ALPHABET[b % REFERRAL_ALPHABET.length];
  return out;
}

/** `Wallet 0x1234…abcd`: §2 "a fixed prefix and an abbreviated address". */
export const walletDisplayName = (address: string) => `Wallet ${address.slice(0, 6)}...${address.slice(-4)}`;

export type AccountsDeps = {
  db: Db;
  config: Pick<
    Config,
    | 'ADMIN_EMAILS'
    | 'ADMIN_EMAILS_REQUIRE_VERIFIED'
    | 'DEFAULT_PLAN'
    | 'configured'
    | 'PUBLIC_URL'
    | 'SIWE_CHAIN_ID'
    | 'WALLET_EMAIL_DOMAIN'
    | 'REGISTER_RATE_LIMIT'
    | 'NONCE_RATE_LIMIT'
  > &
    LoginThrottleConfig;
  botVerifier: BotVerifier;
  rateLimiter: RateLimiter;
  signatureVerifier: SignatureVerifier;
  /** 32-byte key the SIWE nonce HMAC key is derived from (SECRETS_ENCRYPTION_KEY); default: random per process */
  nonceSecret?: Buffer;
  /** cookie-token → user cache in front of the session lookup (src/lib/evicting-cache.ts); none: always query */
  sessionCache?: SessionCache<CachedSession>;
  now?: () => Date;
};

export function createAccountsService(deps: AccountsDeps) {
  const { db, config } = deps;
  const now = deps.now ?? (() => new Date());
  const publicUrl = new URL(config.PUBLIC_URL);
  const loginThrottle = createLoginThrottle(deps.rateLimiter, config);
  const nonces = createNonceMinter(deps.nonceSecret ?? randomBytes(32), LIMITS.siweNonceTtlMs);
  // cache misses asked in the same event-loop turn share one query (src/lib/batch-loader.ts)
  const findSessionUser = createBatchLoader({
    load: async (hashes: Buffer[]) => {
      const rows = await accountsRepo.findSessionUsers(db.pool, hashes);
      return new Map(rows.map((r) => [r.hash, r]));
    },
    id: (hash) => hash.toString('hex'),
  });
  const tooManyLogins = (ms: number) =>
    tooManyRequests('Too many failed sign-in attempts; try again later', { retryAfter: Math.max(1, Math.ceil(ms / 1000)) });

  /** With `passwordHash` (password sign-in): made only while that hash is still the user's, else null. */
  async function createSession(userId: string, name: string, meta: RequestMeta): Promise<NewSession>;
  async function createSession(userId: string, name: string, meta: RequestMeta, passwordHash: string): Promise<NewSession | null>;
  async function createSession(userId: string, name: string, meta: RequestMeta, passwordHash?: string): Promise<NewSession | null> {
    const token = randomToken(32);
    const expiresAt = new Date(now().getTime() + LIMITS.sessionTtlMs);
    const row = { userId, tokenHash: sha256(token), expiresAt, userAgent: meta.userAgent, ip: meta.ip };
    if (passwordHash === undefined) await accountsRepo.insertSession(db.kysely, row);
    else if (!(await accountsRepo.insertSessionIfPassword(db.kysely, row, passwordHash))) return null;
    return { token, expiresAt, user: { id: userId, name } };
  }

  return {
    /** §4.1 POST /api/register. Input is already shape-validated by the route schema. */
    async register(
      input: {
        email: string;
        password: string;
        name?: string | undefined;
        referralCode?: string | undefined;
        botToken?: string | undefined;
      },
      meta: RequestMeta,
    ) {
      // The wallet pseudo-domain belongs to wallet sign-in: a wallet signing in links to the user
      // holding its derived email (§4.1), so letting anyone register `<victim address>@wallet.local`
      // with a password would let them pre-claim the victim's future wallet account.
      if (input.email.trim().toLowerCase().endsWith(`@${config.WALLET_EMAIL_DOMAIN.toLowerCase()}`)) {
        throw badRequest('Invalid email format: this domain is reserved for wallet sign-in');
      }
      // docs/security.md: the most common passwords are the first ones guessed
      if (await isCommonPassword(input.password)) throw badRequest(COMMON_PASSWORD_MESSAGE);
      const limit = await deps.rateLimiter.consume(`register:${meta.ip}`, config.REGISTER_RATE_LIMIT, LIMITS.registerWindowMs);
      if (!limit.allowed) throw tooManyRequests('Too many requests', { retryAfter: Math.ceil(limit.retryAfterMs / 1000) });
      if (!(await deps.botVerifier.verify(input.botToken, meta.ip))) throw forbidden('Bot detection failed');

      const email = input.email.trim().toLowerCase();
      const name = input.name?.trim() || email;
      let referrerId: string | null = null;
      if (input.referralCode) {
        const referrer = await accountsRepo.findUserByReferralCode(db.kysely, input.referralCode);
        if (!referrer) throw badRequest('Invalid referral code');
        referrerId = referrer.id;
      }
      const passwordHash = await argonHash(input.password, { algorithm: ARGON2ID });
      try {
        return await db.kysely.transaction().execute(async (trx) => {
          const user = await accountsRepo.insertUser(trx, {
            email,
            name,
            passwordHash,
            referralCode: newReferralCode(),
            referredBy: referrerId,
            credits: referrerId ? LIMITS.referralCredit : 0,
            // no card processor: nobody can subscribe, so every account has the operator's plan
            ...(config.configured.stripe ? {} : { plan: config.DEFAULT_PLAN }),
          });
          if (referrerId) await accountsRepo.addCredits(trx, referrerId, LIMITS.referralCredit);
          return user;
        });
      } catch (err) {
        // the unique index on lower(email) decides races: ten parallel sign-ups, one user
        if (isUniqueViolation(err, 'users_email_lower_key')) throw conflict('User already exists');
        throw err;
      }
    },

    /** §4.1 POST /api/auth/login: 401 for an unknown email and a wrong password alike. */
    async login(email: string, password: string, meta: RequestMeta): Promise<NewSession> {
      // failed-attempt limits (login-throttle.service.ts): 429 with Retry-After before any password check
      const attempt = await loginThrottle.attempt(email, meta.ip);
      if (attempt.refusedForMs !== undefined) throw tooManyLogins(attempt.refusedForMs);
      let user: Awaited<ReturnType<typeof accountsRepo.findUserForLogin>>;
      let sessionHere = false;
      try {
        user = await accountsRepo.findUserForLogin(db.kysely, email.trim());
        if (attempt.accountLimited && user) sessionHere = await accountsRepo.hasLiveSessionFromIp(db.kysely, user.id, meta.ip);
      } catch (err) {
        // no password was checked: a database outage must not count as a guess (docs/security.md "Password sign-in")
        await attempt.abandoned().catch(() => {});
        throw err;
      }
      if (attempt.accountLimited && !sessionHere) throw tooManyLogins(attempt.accountRetryAfterMs);
      const ok = await argonVerify(user?.password_hash ?? (await DUMMY_HASH), password).catch(() => false);
      if (!user?.password_hash || !ok) throw unauthorized('Invalid credentials');
      await attempt.succeeded();
      // the password may have been cleared or replaced while it was being checked (a provider's
      // first proof of the address, a reset): then it opens nothing
      const session = await createSession(user.id, user.name, meta, user.password_hash);
      if (!session) throw unauthorized('Invalid credentials');
      return session;
    },

    /** A session for a user another sign-in method has authenticated (identity provider, code host: ./external-signin.service.ts). */
    issueSession(userId: string, name: string, meta: RequestMeta): Promise<NewSession> {
      return createSession(userId, name, meta);
    },

    /** The user behind a cookie token, or null (unknown, expired or signed-out session). */
    async sessionUser(token: string | undefined): Promise<SessionUser | null> {
      if (!token || token.length > 128) return null;
      // the cache key is the hash as base64url text; the Buffer form is made only for a miss
      const key = sha256Base64url(token);
      const cached = deps.sessionCache?.get(key);
      if (cached) return toSessionUser(cached);
      const row = await findSessionUser(Buffer.from(key, 'base64url'));
      if (!row) return null;
      const isAdmin = isAdminUser(config, row);
      const user = { id: row.id, name: row.name, email: row.email, isAdmin, notice: row.password_cleared_by };
      deps.sessionCache?.set(key, { ...user, expiresAt: row.expires_ms });
      return toSessionUser(user);
    },

    /** Dismisses the signed-in user's notices (GET /api/auth/session `user.notice`). */
    async dismissNotices(userId: string): Promise<void> {
      await db.withUser(userId, (trx) => accountsRepo.deleteNotices(trx, userId));
      deps.sessionCache?.evictUser(userId); // cached sessions carry the notice
    },

    async signOut(token: string | undefined): Promise<void> {
      if (!token || token.length > 128) return;
      const tokenHash = sha256(token);
      await accountsRepo.deleteSession(db.kysely, tokenHash);
      deps.sessionCache?.evictToken(tokenHash.toString('base64url'));
    },

    /** Ends every session of a user (security events, account disable). */
    /** Purge job (platform.startWebJobs): forgets spent SIWE nonces once they have expired. */
    async purgeExpiredNonces(): Promise<number> {
      const r = await accountsRepo.deleteExpiredNonces(db.kysely);
      return Number(r[0]?.numDeletedRows ?? 0);
    },

    async purgeExpiredSessions(): Promise<number> {
      const r = await accountsRepo.deleteExpiredSessions(db.kysely);
      return Number(r[0]?.numDeletedRows ?? 0);
    },

    async revokeAllSessions(userId: string): Promise<void> {
      await accountsRepo.deleteSessionsOfUser(db.kysely, userId);
      deps.sessionCache?.evictUser(userId);
    },

    /** What a wallet sign-in message must name (the dashboard builds its EIP-4361 message from it). */
    siweParameters() {
      return { domain: publicUrl.host, uri: publicUrl.origin, chainId: config.SIWE_CHAIN_ID, version: '1' as const };
    },

    /**
     * §4.1 GET|POST /api/auth/nonce: signed and expiring (10 minutes), nothing stored
     * (siwe-nonce.rules.ts), so a flood of nonce requests writes no rows. 128 random bits from the
     * CSPRNG (not viem's generateSiweNonce, whose consecutive nonces overlap).
     */
    async issueNonce(meta: RequestMeta): Promise<string> {
      const limit = await deps.rateLimiter.consume(`nonce:${meta.ip}`, config.NONCE_RATE_LIMIT, LIMITS.nonceWindowMs);
      if (!limit.allowed) throw tooManyRequests('Too many requests', { retryAfter: Math.max(1, Math.ceil(limit.retryAfterMs / 1000)) });
      return nonces.issue(now());
    },

    /** §4.1 POST /api/wallet-auth. */
    async walletAuth(input: { address: string; message: string; signature: string }, meta: RequestMeta): Promise<NewSession> {
      const check = await checkSiweMessage(input, {
        domain: publicUrl.host,
        origin: publicUrl.origin,
        chainId: config.SIWE_CHAIN_ID,
        now: now(),
      });
      if (!check.ok) throw unauthorized(check.reason);
      // consumed before the (slow, possibly remote) signature check: a nonce is spent by its
      // first use whatever the outcome, so a replay never reaches the verifier
      const nonce = nonces.check(check.nonce, now());
      if (!nonce.ok || !(await accountsRepo.spendNonce(db.kysely, check.nonce, nonce.expiresAt)))
        throw unauthorized('Invalid or expired nonce');
      let valid: boolean;
      try {
        valid = await deps.signatureVerifier.verify(check.address, input.message, input.signature as Hex);
      } catch (e) {
        if (e instanceof SignatureServiceUnavailableError)
          throw serviceUnavailable('Could not verify the signature: the chain RPC is unreachable, try again');
        throw e;
      }
      if (!valid) throw unauthorized('Invalid signature');
      const address = check.address.toLowerCase();
      const email = `${address}@${config.WALLET_EMAIL_DOMAIN}`.toLowerCase();
      const existing = await accountsRepo.findUserByWalletOrEmail(db.kysely, address, email);
      if (existing) {
        if (!existing.wallet_address) await accountsRepo.linkWallet(db.kysely, existing.id, address);
        return createSession(existing.id, existing.name, meta);
      }
      try {
        const user = await accountsRepo.insertUser(db.kysely, {
          email,
          name: walletDisplayName(check.address),
          passwordHash: null,
          referralCode: newReferralCode(),
          walletAddress: address,
          ...(config.configured.stripe ? {} : { plan: config.DEFAULT_PLAN }),
        });
        return createSession(user.id, user.name, meta);
      } catch (err) {
        // a parallel first sign-in of the same wallet created the user: sign in to that one
        if (!isUniqueViolation(err)) throw err;
        const raced = await accountsRepo.findUserByWalletOrEmail(db.kysely, address, email);
        if (!raced) throw err;
        return createSession(raced.id, raced.name, meta);
      }
    },

    /** Current user (§4.1 "Current user and profile"), read under row-level security. */
    async getProfile(userId: string) {
      const row = await db.withUser(userId, (trx) => accountsRepo.getProfile(trx, userId));
      if (!row) throw notFound('User not found');
      return toProfile(row);
    },

    async updateProfile(userId: string, patch: { name?: string | undefined }) {
      const name = patch.name?.trim();
      if (name === undefined) throw badRequest('Nothing to update; send name');
      if (name.length < 1 || name.length > LIMITS.profileNameMax) throw badRequest(`Name must be 1 to ${LIMITS.profileNameMax} characters`);
      const row = await db.withUser(userId, (trx) => accountsRepo.updateProfile(trx, userId, { name }));
      if (!row) throw notFound('User not found');
      deps.sessionCache?.evictUser(userId); // cached sessions carry the old name
      return toProfile(row);
    },
  };
}

/** The session user as answered; the notice (rare) only when there is one, so the §4.1 shape stays as it is otherwise. */
function toSessionUser(u: { id: string; name: string; email: string; isAdmin: boolean; notice?: ExternalProvider | null }): SessionUser {
  const user: SessionUser = { id: u.id, name: u.name, email: u.email, isAdmin: u.isAdmin };
  if (u.notice) user.notice = passwordClearedNotice(u.notice);
  return user;
}

function toProfile(row: {
  id: string;
  email: string;
  name: string;
  plan: string;
  credits: number;
  two_factor_enabled: boolean;
  referral_code: string;
}) {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    plan: row.plan,
    credits: row.credits,
    twoFactorEnabled: row.two_factor_enabled,
    referralCode: row.referral_code,
  };
}

export type AccountsService = ReturnType<typeof createAccountsService>;
