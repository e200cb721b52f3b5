/**
 * Wires the domains over explicit dependencies (DESIGN rule 2). main.ts and the tests build the
 * platform through this one function; tests pass fakes for external services only.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from './config/env.ts';
import type { Secrets } from './config/secrets.ts';
import type { Db } from './db/client.ts';
import { createAccountsService } from './domains/accounts/accounts.service.ts';
import { allowAllBotVerifier, createSiteverifyBotVerifier, type BotVerifier } from './domains/accounts/bot-verifier.ts';
import { createChainSignatureVerifier, type SignatureVerifier } from './domains/accounts/siwe-verifier.ts';
import { createHealthService, createOsMetrics, type SystemMetrics } from './domains/health/health.service.ts';
import { buildBackendApp } from './http/backend/app.ts';
import { buildWebApp } from './http/web/app.ts';
import { createRateLimiter, type RateLimiter } from './lib/rate-limiter.ts';

export type PlatformDeps = {
  config: Config;
  db: Db;
  secrets: Secrets;
  logger?: FastifyBaseLogger;
  /** Overrides for external services (tests); the real implementations are the defaults. */
  rateLimiter?: RateLimiter;
  botVerifier?: BotVerifier;
  signatureVerifier?: SignatureVerifier;
  metrics?: SystemMetrics;
  now?: () => Date;
};

export function createPlatform(deps: PlatformDeps) {
  const { config, db } = deps;
  const rateLimiter = deps.rateLimiter ?? createRateLimiter(config.REDIS_URL);
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
    ...(deps.now ? { now: deps.now } : {}),
  });
  const health = createHealthService({ metrics: deps.metrics ?? createOsMetrics() });
  const appOptions = deps.logger ? { logger: deps.logger } : {};

  return {
    services: { accounts, health },
    buildWebApp: () => buildWebApp(config, { accounts, health }, appOptions),
    buildBackendApp: () => buildBackendApp(config, {}, appOptions),
    async close() {
      await rateLimiter.close();
    },
  };
}

export type Platform = ReturnType<typeof createPlatform>;
