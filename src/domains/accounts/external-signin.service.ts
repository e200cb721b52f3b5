/**
 * Sign-in with the identity provider (OpenID Connect) and the code host (OAuth app), §4.1:
 * start (redirect to the provider with a sealed state cookie), then the callback sequence —
 * provider error → no exchange; state checked against the cookie; code exchanged; email and name
 * read from the provider; the user found by the link, else by verified email (linked, not
 * duplicated, §5 "automatic account linking by matching email"), else created; the link recorded
 * with the provider's refresh token encrypted at rest; a session made as password sign-in makes
 * one; redirect to `/dashboard`.
 *
 * Every failure is a redirect to `/login?error=<code>` (§4.1, §7), the codes shared by both providers:
 *   AccessDenied      the user declined at the provider (`error=access_denied`), or identity-provider
 *                     sign-in is disabled for the account by a security event (§6 account-disabled)
 *   IdpAuthFailed     the provider answered another `error`, or the callback is not one this browser
 *                     started (no or expired state cookie, `state` mismatch, no `code`)
 *   IdpNotConfigured  the provider's client id or secret is not set
 *   IdpTokenFailed    the code exchange failed or the ID token did not verify
 *   IdpNoEmail        no verified email from the provider (an unverified one is never linked by:
 *                     whoever set it could take over the account holding it)
 *   IdpAuthError      anything else (provider unreachable, our own failure); logged
 */
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { encryptSecret, randomToken, safeEqual } from '../../lib/crypto.ts';
import { accountsRepo } from './accounts.repo.ts';
import { type AccountsService, type NewSession, newReferralCode, type RequestMeta } from './accounts.service.ts';
import { type CodehostClient, CodehostTokenError, createCodehostClient } from './codehost.client.ts';
import { createIdpClient, type IdpClient, IdpTokenError } from './idp.client.ts';
import { linkedAccountsRepo } from './linked-accounts.repo.ts';
import { createOAuthStateSealer, type ExternalProvider } from './oauth-state.rules.ts';

export const SIGNIN_ERRORS = ['AccessDenied', 'IdpAuthFailed', 'IdpNotConfigured', 'IdpTokenFailed', 'IdpNoEmail', 'IdpAuthError'] as const;
export type SignInError = (typeof SIGNIN_ERRORS)[number];

/** What a start or callback answers: where to send the browser, and what to set. */
export type SignInStep = {
  redirect: string;
  /** the sealed state cookie to set (start) */
  stateCookie?: string;
  /** the session to set (callback success) */
  session?: NewSession;
  /** why it failed, for the log line (never a token or code) */
  failure?: { code: SignInError; reason: string };
  /** the user whose earlier sessions this sign-in ended (first proof of the address): the web app ends their open streams */
  endedSessionsOf?: string;
};

type Identity = { subject: string; email: string | null; emailVerified: boolean; name: string | null; refreshToken: string | null };

export type ExternalSignInDeps = {
  db: Db;
  accounts: Pick<AccountsService, 'issueSession' | 'revokeAllSessions'>;
  config: Pick<
    Config,
    | 'PUBLIC_URL'
    | 'IDP_CLIENT_ID'
    | 'IDP_CLIENT_SECRET'
    | 'IDP_ISSUER'
    | 'CODEHOST_CLIENT_ID'
    | 'CODEHOST_CLIENT_SECRET'
    | 'CODEHOST_URL'
    | 'CODEHOST_API_URL'
    | 'DEFAULT_PLAN'
    | 'configured'
  >;
  /**
   * An account a provider's first proof took back from whoever registered its address: the
   * credentials that outlive sessions (API keys) go too (the platform wires the keys service here).
   */
  onReclaimed?: (userId: string) => Promise<unknown>;
  /** SECRETS_ENCRYPTION_KEY: seals the state cookie (a derived key) and encrypts refresh tokens */
  secretsKey: Buffer;
  now?: () => Date;
};

// biome-ignore lint/suspicious/noControlCharactersInRegex: a provider's display name becomes a one-line profile name
const CONTROL = /[\u0000-\u001f\u007f]/g;
const fail = (code: SignInError, reason: string): SignInStep => ({ redirect: `/login?error=${code}`, failure: { code, reason } });

export function createExternalSignIn(deps: ExternalSignInDeps) {
  const { db, config } = deps;
  const origin = config.PUBLIC_URL.replace(/\/+$/, '');
  const sealer = createOAuthStateSealer(deps.secretsKey, deps.now);
  const idp: IdpClient | null =
    config.configured.idp && config.IDP_CLIENT_ID[0] && config.IDP_CLIENT_SECRET
      ? createIdpClient({
          issuer: config.IDP_ISSUER,
          // the first id is this site's client; the others are accepted only as RISC audiences
          clientId: config.IDP_CLIENT_ID[0],
          clientSecret: config.IDP_CLIENT_SECRET,
          redirectUri: `${origin}/api/auth/idp/callback`,
        })
      : null;
  const codehost: CodehostClient | null =
    config.configured.codehost && config.CODEHOST_CLIENT_ID && config.CODEHOST_CLIENT_SECRET
      ? createCodehostClient({
          url: config.CODEHOST_URL,
          apiUrl: config.CODEHOST_API_URL,
          clientId: config.CODEHOST_CLIENT_ID,
          clientSecret: config.CODEHOST_CLIENT_SECRET,
          redirectUri: `${origin}/api/auth/codehost/callback`,
        })
      : null;

  /** The user the identity belongs to: by link, else by verified email, else a new one; linked either way. */
  async function resolve(
    provider: ExternalProvider,
    id: Identity,
  ): Promise<SignInStep | { userId: string; name: string; revoked?: boolean }> {
    const email = id.email && id.emailVerified && id.email.length <= 320 ? id.email.trim().toLowerCase() : null;
    let user = await linkedAccountsRepo.findUserByLink(db.kysely, provider, id.subject);
    if (!user) {
      if (!email) return fail('IdpNoEmail', 'no verified email');
      user = await linkedAccountsRepo.findUserByEmail(db.kysely, email);
    }
    // §6 account-disabled (hijacking): the identity provider's word is not taken for this account until re-enabled
    if (user && provider === 'idp' && (user.idp_signin_disabled_at !== null || user.idp_sign_in_disabled)) {
      return fail('AccessDenied', 'identity-provider sign-in disabled for this account');
    }
    const refreshTokenEnc = id.refreshToken ? encryptSecret(deps.secretsKey, id.refreshToken) : null;
    const link = { provider, subject: id.subject, email, refreshTokenEnc };
    if (user) {
      const existing = user;
      const firstProof = email !== null && !existing.email_verified && existing.email.toLowerCase() === email;
      const { owner, proved } = await db.kysely.transaction().execute(async (trx) => {
        const owner = await linkedAccountsRepo.upsertLink(trx, { ...link, userId: existing.id });
        if (owner !== existing.id || !firstProof) return { owner, proved: false };
        // The provider has just proved who owns this address, which nobody had before. Whoever
        // registered it with a password may be a stranger (pre-registration takeover): the
        // account becomes the prover's alone. In one transaction: the address verified, the
        // password cleared (password sign-ins in flight lose too: accountsRepo.insertSessionIfPassword),
        // every session ended, and the owner told on the dashboard.
        // A parallel sign-in that proved it first has done all this (and its session is the owner's).
        if (!(await linkedAccountsRepo.markEmailVerified(trx, existing.id))) return { owner, proved: false };
        if (await linkedAccountsRepo.clearPassword(trx, existing.id)) {
          await accountsRepo.recordPasswordClearedNotice(trx, existing.id, provider);
        }
        await accountsRepo.deleteSessionsOfUser(trx, existing.id);
        return { owner, proved: true };
      });
      if (owner !== existing.id) return fail('IdpAuthError', 'the link belongs to another user');
      // the rows are gone; now the session caches (and open streams) forget them too, and API keys
      // made before the proof stop working: a key is a session that does not expire
      if (proved) {
        await deps.accounts.revokeAllSessions(existing.id);
        await deps.onReclaimed?.(existing.id);
      }
      return { userId: existing.id, name: existing.name, revoked: proved };
    }
    if (!email) return fail('IdpNoEmail', 'no verified email');
    const name = (id.name ?? '').replace(CONTROL, '').trim().slice(0, LIMITS.profileNameMax) || email.slice(0, LIMITS.profileNameMax);
    try {
      const created = await db.kysely.transaction().execute(async (trx) => {
        const u = await accountsRepo.insertUser(trx, {
          email,
          name,
          passwordHash: null,
          referralCode: newReferralCode(),
          // no card processor: nobody can subscribe, so every account has the operator's plan (as register does)
          ...(config.configured.stripe ? {} : { plan: config.DEFAULT_PLAN }),
        });
        await linkedAccountsRepo.markEmailVerified(trx, u.id);
        await linkedAccountsRepo.upsertLink(trx, { ...link, userId: u.id });
        return u;
      });
      return { userId: created.id, name: created.name };
    } catch (err) {
      // a parallel first sign-in (or sign-up) took the email or the link: the retry finds and links it
      if (!isUniqueViolation(err)) throw err;
      const raced =
        (await linkedAccountsRepo.findUserByLink(db.kysely, provider, id.subject)) ??
        (await linkedAccountsRepo.findUserByEmail(db.kysely, email));
      if (!raced) throw err;
      return resolve(provider, id);
    }
  }

  return {
    configured: (provider: ExternalProvider) => (provider === 'idp' ? idp !== null : codehost !== null),

    /** §4.1 GET /api/auth/idp and /api/auth/codehost. */
    async start(provider: ExternalProvider): Promise<SignInStep> {
      const state = randomToken(32);
      if (provider === 'idp') {
        if (!idp) return fail('IdpNotConfigured', 'IDP_CLIENT_ID or IDP_CLIENT_SECRET unset');
        const check = { state, nonce: randomToken(32), codeVerifier: randomToken(48) };
        try {
          return { redirect: await idp.authorizationUrl(check), stateCookie: sealer.seal({ provider, ...check }) };
        } catch (err) {
          return fail('IdpAuthError', `discovery failed: ${(err as Error).message}`.slice(0, 300));
        }
      }
      if (!codehost) return fail('IdpNotConfigured', 'CODEHOST_CLIENT_ID or CODEHOST_CLIENT_SECRET unset');
      return { redirect: codehost.authorizationUrl(state), stateCookie: sealer.seal({ provider, state }) };
    },

    /** §4.1 GET /api/auth/idp/callback (and the code host's): the callback sequence. */
    async callback(provider: ExternalProvider, query: Record<string, string>, stateCookie: string | undefined, meta: RequestMeta) {
      const client = provider === 'idp' ? idp : codehost;
      if (!client) return fail('IdpNotConfigured', 'provider not configured');
      // §4.1: a provider error is reported without exchanging anything
      if (query.error !== undefined) {
        return fail(query.error === 'access_denied' ? 'AccessDenied' : 'IdpAuthFailed', `provider error ${query.error.slice(0, 64)}`);
      }
      const flow = sealer.open(stateCookie, provider);
      if (!flow) return fail('IdpAuthFailed', 'no valid state cookie (not started in this browser, or expired)');
      if (!query.state || !safeEqual(query.state, flow.state)) return fail('IdpAuthFailed', 'state mismatch');
      if (!query.code) return fail('IdpAuthFailed', 'no code');
      let identity: Identity;
      try {
        identity =
          provider === 'idp' && idp
            ? await idp.exchange(query, { state: flow.state, nonce: flow.nonce ?? '', codeVerifier: flow.codeVerifier ?? '' })
            : { ...(await (client as CodehostClient).exchange(query.code)), emailVerified: true };
      } catch (err) {
        if (err instanceof IdpTokenError || err instanceof CodehostTokenError) return fail('IdpTokenFailed', err.message);
        return fail('IdpAuthError', `provider request failed: ${(err as Error).message}`.slice(0, 300));
      }
      const who = await resolve(provider, identity);
      if ('redirect' in who) return who;
      const session = await deps.accounts.issueSession(who.userId, who.name, meta);
      return { redirect: '/dashboard', session, ...(who.revoked ? { endedSessionsOf: who.userId } : {}) } satisfies SignInStep;
    },

    /** The signed-in user's linked accounts (Settings), under row-level security. */
    async listLinked(userId: string) {
      const rows = await db.withUser(userId, (trx) => linkedAccountsRepo.listForUser(trx, userId));
      return rows.map((r) => ({
        id: r.id,
        provider: r.provider as ExternalProvider,
        email: r.email,
        linkedAt: r.created_at.toISOString(),
      }));
    },
  };
}

export type ExternalSignIn = ReturnType<typeof createExternalSignIn>;
