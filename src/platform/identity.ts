/**
 * The identity services of the platform (docs/identity.md, docs/security.md): accounts and
 * sessions (§4.1), sign-in with an identity provider or a code host, password reset by email
 * (§4.18), and the security-event receivers (§6). platform.ts builds them through this one call.
 */

import {
  allowAllBotVerifier,
  type CachedSession,
  createAccountsService,
  createChainSignatureVerifier,
  createExternalSignIn,
  createPasswordResetService,
  createSiteverifyBotVerifier,
  createSmtpMailer,
  defaultMailFrom,
} from '../domains/accounts/index.ts';
import { createRiscVerifier, createSecurityEventsService, riscConfigUrl } from '../domains/security-events/index.ts';
import type { SessionCache } from '../lib/evicting-cache.ts';
import type { Logger } from '../lib/logger.ts';
import type { RateLimiter } from '../lib/rate-limiter.ts';
import type { PlatformDeps } from '../platform.ts';

export function createIdentityServices(o: {
  deps: PlatformDeps;
  log: Logger;
  rateLimiter: RateLimiter;
  sessionCache: SessionCache<CachedSession>;
  /** a security event was recorded: wake the worker that acts on it */
  onSecurityEventRecorded: () => void;
  /** an address's owner took its account back (docs/identity.md "What a sign-in does"): its API keys go */
  onReclaimed: (userId: string) => Promise<unknown>;
}) {
  const { deps, log, rateLimiter, sessionCache } = o;
  const { config, db } = deps;
  const botVerifier =
    deps.botVerifier ??
    (config.TURNSTILE_SECRET_KEY
      ? createSiteverifyBotVerifier({ secret: config.TURNSTILE_SECRET_KEY, url: config.TURNSTILE_VERIFY_URL })
      : allowAllBotVerifier);
  const signatureVerifier =
    deps.signatureVerifier ?? createChainSignatureVerifier({ rpcUrl: config.SIWE_RPC_URL, chainId: config.SIWE_CHAIN_ID });
  const accounts = createAccountsService({
    db,
    config,
    botVerifier,
    rateLimiter,
    signatureVerifier,
    sessionCache,
    nonceSecret: deps.secrets.secretsEncryptionKey,
    ...(deps.now ? { now: deps.now } : {}),
  });
  // §4.1 identity-provider and code-host sign-in; its sessions are the accounts service's
  const externalSignIn = createExternalSignIn({
    db,
    config,
    accounts,
    onReclaimed: o.onReclaimed,
    secretsKey: deps.secrets.secretsEncryptionKey,
    ...(deps.now ? { now: deps.now } : {}),
  });
  // the platform's mail (SMTP_URL): password resets, spend alerts
  const mailer = config.SMTP_URL
    ? createSmtpMailer({ url: config.SMTP_URL, from: config.MAIL_FROM ?? defaultMailFrom(config.PUBLIC_URL) })
    : undefined;
  // password reset by email (docs/security.md "Password reset"): a 503 without SMTP_URL
  const passwordReset = createPasswordResetService({
    db,
    config,
    rateLimiter,
    logger: log,
    mailer,
    revokeAllSessions: (userId) => accounts.revokeAllSessions(userId),
    ...(deps.now ? { now: deps.now } : {}),
  });
  // §4.1 / §6 security events: the receivers verify and record, the worker (platform.ts startWebJobs) acts
  const securityEvents = createSecurityEventsService({
    db,
    accounts,
    verifier: createRiscVerifier({
      issuer: config.IDP_ISSUER,
      audiences: config.IDP_CLIENT_ID,
      configUrl: riscConfigUrl(config.IDP_ISSUER, config.IDP_RISC_CONFIG_URL),
      ...(deps.securityEvents?.refetchCooldownMs !== undefined ? { refetchCooldownMs: deps.securityEvents.refetchCooldownMs } : {}),
    }),
    logger: log,
    onRecorded: o.onSecurityEventRecorded,
  });
  return { accounts, externalSignIn, passwordReset, securityEvents, mailer };
}
