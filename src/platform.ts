/**
 * Wires the domains over explicit dependencies (DESIGN rule 2). main.ts and the tests build the
 * platform through this one function; tests pass fakes for external services only.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from './config/env.ts';
import type { Secrets } from './config/secrets.ts';
import type { Db } from './db/client.ts';
import { createAccountsService } from './domains/accounts/accounts.service.ts';
import { createSessionCache, type SessionCache } from './domains/accounts/session-cache.ts';
import { allowAllBotVerifier, createSiteverifyBotVerifier, type BotVerifier } from './domains/accounts/bot-verifier.ts';
import { createChainSignatureVerifier, type SignatureVerifier } from './domains/accounts/siwe-verifier.ts';
import { createConfigService } from './domains/config/config.service.ts';
import { createHealthService, createOsMetrics, type SystemMetrics } from './domains/health/health.service.ts';
import { createBridgeService } from './domains/bridge/bridge.service.ts';
import { createAiService } from './domains/ai/ai.service.ts';
import type { ChatProvider, ProviderName } from './domains/ai/providers/provider.ts';
import type { UsageStore } from './domains/ai/usage.ts';
import { createHeartbeatService } from './domains/heartbeat/heartbeat.service.ts';
import { createWorkflowsService } from './domains/workflows/workflows.service.ts';
import { createHostingMcpService } from './domains/hosting-mcp/hosting-mcp.service.ts';
import { createKeysService } from './domains/keys/keys.service.ts';
import { createHostingStatusService } from './domains/hosting-status/hosting-status.service.ts';
import { createUpstashStatusStore, type StatusStore } from './domains/hosting-status/status-store.ts';
import { createSessionWalletService } from './domains/session-wallet/session-wallet.service.ts';
import { createHttpTradingClient, type TradingClient } from './domains/trading/trading-client.ts';
import { createTradingService } from './domains/trading/trading.service.ts';
import { createAgentsService } from './domains/agents/agents.service.ts';
import { createAgentsWebService } from './domains/agents/agents.web.service.ts';
import { createBackendClient } from './domains/agents/backend-client.ts';
import type { HostingDriver } from './domains/agents/drivers/driver.ts';
import { createHostingDriver } from './domains/agents/drivers/index.ts';
import { createDeploymentWorker } from './workers/deployments.ts';
import { pino } from 'pino';
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
  sessionCache?: SessionCache;
  metrics?: SystemMetrics;
  /** trading service client (default: HTTP client on TRADING_API_URL when set) */
  tradingClient?: TradingClient;
  /** hosting status key-value store (default: @upstash/redis on KV_REST_API_URL/TOKEN when set) */
  statusStore?: StatusStore;
  /** AI provider adapters (default: built from the AI settings; tests point the *_BASE_URL settings at fakes instead) */
  aiProviders?: Partial<Record<ProviderName, ChatProvider>>;
  /** AI usage store (default: PostgreSQL, batched) */
  aiUsageStore?: UsageStore;
  now?: () => Date;
  /** hosting driver (default: the one HOSTING_DRIVER names); a driver passed in is the caller's to shut down */
  driver?: HostingDriver;
  /** deployment worker poll interval in ms (default 1000) */
  workerPollMs?: number;
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

  const sessionCache = deps.sessionCache ?? createSessionCache({ ...(config.REDIS_URL ? { redisUrl: config.REDIS_URL } : {}) });
  const accounts = createAccountsService({
    db,
    config,
    botVerifier,
    rateLimiter,
    signatureVerifier,
    sessionCache,
    ...(deps.now ? { now: deps.now } : {}),
  });
  const health = createHealthService({ metrics: deps.metrics ?? createOsMetrics() });
  const workflows = createWorkflowsService({ db });
  const heartbeat = createHeartbeatService({ db, ...(deps.now ? { now: deps.now } : {}) });
  const bridge = createBridgeService({ db, ...(deps.now ? { now: deps.now } : {}) });
  const trading = createTradingService({
    db,
    config,
    encryptionKey: deps.secrets.secretsEncryptionKey,
    client:
      deps.tradingClient ??
      (config.TRADING_API_URL ? createHttpTradingClient({ baseUrl: config.TRADING_API_URL, timeoutMs: config.TRADING_TIMEOUT_MS }) : undefined),
  });
  const sessionWallet = createSessionWalletService({ db, config, encryptionKey: deps.secrets.walletEncryptionKey });
  const hostingStatus = createHostingStatusService({
    db,
    config,
    store:
      deps.statusStore ??
      (config.KV_REST_API_URL && config.KV_REST_API_TOKEN
        ? createUpstashStatusStore({ url: config.KV_REST_API_URL, token: config.KV_REST_API_TOKEN, timeoutMs: config.KV_TIMEOUT_MS })
        : undefined),
    logger: deps.logger,
    ...(deps.now ? { now: deps.now } : {}),
  });
  const agentConfig = createConfigService({ db, ...(deps.now ? { now: deps.now } : {}) });
  const keys = createKeysService({ db, config });
  const hostingMcp = createHostingMcpService(deps.now ? { now: deps.now } : {});
  const ai = createAiService({ config, db, rateLimiter, providers: deps.aiProviders, usage: deps.aiUsageStore, logger: deps.logger, now: deps.now });
  const log = deps.logger ?? pino({ level: config.LOG_LEVEL });
  const ownsDriver = !deps.driver;
  const driver = deps.driver ?? createHostingDriver(config);
  let worker: ReturnType<typeof createDeploymentWorker> | undefined;
  const agents = createAgentsService({
    db,
    config,
    secrets: deps.secrets,
    driver,
    // the agent's own model access (§8 "model-router key"); never the platform's master secrets
    runtimeEnv: (agent) => ({
      ...(config.ROUTER_API_KEY ? { AGENT_MODEL_BASE_URL: config.ROUTER_BASE_URL, AGENT_MODEL_API_KEY: config.ROUTER_API_KEY } : {}),
      AGENT_MODEL: agent.model,
    }),
    onEnqueue: () => worker?.wake(),
  });
  const agentsWeb = createAgentsWebService({
    db,
    config,
    secrets: deps.secrets,
    backend: createBackendClient({ baseUrl: config.BACKEND_URL, apiKey: config.INTERNAL_API_KEY }),
    log,
  });
  const appOptions = deps.logger ? { logger: deps.logger } : {};

  return {
    services: { agents, agentsWeb, driver, ai, accounts, health, trading, sessionWallet, hostingStatus, agentConfig, keys, hostingMcp, workflows, heartbeat, bridge },
    buildWebApp: () => buildWebApp(config, { agentsWeb, ai, accounts, health, trading, sessionWallet, hostingStatus, agentConfig, keys, workflows, heartbeat, bridge }, appOptions),
    buildBackendApp: () => buildBackendApp(config, { agents, ai, keys, hostingMcp }, appOptions),
    /** Starts the deployment worker (backend processes): re-deploys agents that should run, then takes jobs. */
    async startWorkers() {
      worker ??= createDeploymentWorker({ db, agents, logger: log, ...(deps.workerPollMs ? { pollMs: deps.workerPollMs } : {}) });
      await worker.start();
    },
    async close() {
      await worker?.stop();
      if (ownsDriver) await driver.shutdown().catch((err) => log.warn({ err }, 'hosting driver shutdown failed'));
      await ai.close();
      await rateLimiter.close();
      await sessionCache.close();
    },
  };
}

export type Platform = ReturnType<typeof createPlatform>;
