/**
 * Wires the domains over explicit dependencies (docs/architecture.md rule 2). main.ts and the tests build the
 * platform through this one function; tests pass fakes for external services only.
 * Read top to bottom: every service with its dependencies; groups of services that belong together
 * (identity, payments, outside integrations, x402, Underground, the backend's workers) are built in src/platform/.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from './config/env.ts';
import type { Secrets } from './config/secrets.ts';
import type { Db } from './db/client.ts';
import { type BotVerifier, type CachedSession, createAdminResetLinks, type SignatureVerifier } from './domains/accounts/index.ts';
import { createAdminService } from './domains/admin/index.ts';
import { createConfigService } from './domains/agent-config/index.ts';
import { createAgentDirectory, createPlatformCounts, type HostingDriver } from './domains/agents/index.ts';
import { type ChatProvider, createAiService, createUsageReport, type ProviderName, type UsageStore } from './domains/ai/index.ts';
import { createBridgeService } from './domains/bridge/index.ts';
import { createCalendarService } from './domains/calendar/index.ts';
import { createHealthService, createPlatformMetrics, type SystemMetrics } from './domains/health/index.ts';
import { createHeartbeatService } from './domains/heartbeat/index.ts';
import { createHostingMcpService } from './domains/hosting-mcp/index.ts';
import type { StatusStore } from './domains/hosting-status/index.ts';
import { type AuthenticatedKey, createKeysService } from './domains/keys/index.ts';
import { type CardProcessor, createLedgerService, type PaidCallCheckout } from './domains/payments/index.ts';
import { createSessionWalletService } from './domains/session-wallet/index.ts';
import { createSpendAlerts } from './domains/spend-alerts/index.ts';
import type { TradingClient } from './domains/trading/index.ts';
import { createUnderground } from './domains/underground/index.ts';
import { createStablecoinBalanceReader } from './domains/wallet/index.ts';
import { channelsFromConfig, createWatchdogService, type WatchdogSettings, watchdogSettingsFromConfig } from './domains/watchdog/index.ts';
import { createWorkflowsService } from './domains/workflows/index.ts';
import { buildBackendApp } from './http/backend/app.ts';
import { createLogger } from './http/shared/logging.ts';
import { buildWebApp } from './http/web/app.ts';
import { createKeyCache, createSessionCache, type SessionCache } from './lib/evicting-cache.ts';
import { createJobMetrics, createProviderMetrics } from './lib/metrics.ts';
import { createRateLimiter, type RateLimiter } from './lib/rate-limiter.ts';
import { createAgentServices } from './platform/agents.ts';
import { createIdentityServices } from './platform/identity.ts';
import { createIntegrationServices } from './platform/integrations.ts';
import { createPaymentServices } from './platform/payments.ts';
import { createUndergroundBus, type UndergroundBusTimings } from './platform/underground-bus.ts';
import { createBackendWorkers } from './platform/workers.ts';
import { createX402 } from './platform/x402.ts';
import { createSecurityEventsWorker } from './workers/security-events.ts';

export type PlatformDeps = {
  config: Config;
  db: Db;
  secrets: Secrets;
  logger?: FastifyBaseLogger;
  /** Overrides for external services (tests); the real implementations are the defaults. */
  rateLimiter?: RateLimiter;
  botVerifier?: BotVerifier;
  signatureVerifier?: SignatureVerifier;
  sessionCache?: SessionCache<CachedSession>;
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
  /** card checkout for the gateway's 402 `stripe.checkoutUrl` (default: none, checkoutUrl null) */
  gatewayCheckout?: PaidCallCheckout;
  /** card processor (default: the stripe SDK on STRIPE_API_URL when STRIPE_SECRET_KEY is set) */
  cardProcessor?: CardProcessor;
  /** watchdog timings over the ones from WATCHDOG_* (tests use milliseconds where the settings are seconds) */
  watchdogSettings?: Partial<WatchdogSettings>;
  /** false: startWorkers() does not start the watchdog (tests that drive it themselves) */
  watchdogEnabled?: boolean;
  /** security events (tests): the JWKS refetch cooldown on an unknown kid, the worker's poll and retry delay, in ms */
  securityEvents?: { refetchCooldownMs?: number; pollMs?: number; retryBaseMs?: number };
  /** Underground bus delivery worker (tests): poll and first retry delay in ms */
  undergroundBus?: UndergroundBusTimings;
  /** where the hosting driver's lines about itself (sandbox, network) go (default: this log); main.ts prints them in its start-up block */
  hostingLog?: (level: 'info' | 'warn', message: string) => void;
};

export function createPlatform(deps: PlatformDeps) {
  const { config, db } = deps;
  const log = deps.logger ?? createLogger(config.LOG_LEVEL, config.LOG_FORMAT);
  const rateLimiter =
    deps.rateLimiter ??
    createRateLimiter(config.REDIS_URL, {
      timeoutMs: config.REDIS_TIMEOUT_MS,
      onError: (err) => log.warn({ err: err.message }, 'Redis unavailable: rate limits fall back to per-process counters'),
    });

  const redisCache = config.REDIS_URL ? { redisUrl: config.REDIS_URL, redisTimeoutMs: config.REDIS_TIMEOUT_MS } : {};
  const keyCache = createKeyCache<AuthenticatedKey>({ ttlMs: config.API_KEY_CACHE_TTL_MS, ...redisCache });
  const baseSessionCache = deps.sessionCache ?? createSessionCache<CachedSession>(redisCache);
  // whatever changes a user enough to evict their sessions (plan, admin rights, revocation)
  // changes the profile their API keys validate to: evict both
  const sessionCache: SessionCache<CachedSession> = {
    ...baseSessionCache,
    evictUser(userId) {
      baseSessionCache.evictUser(userId);
      keyCache.evictUser(userId);
    },
  };
  let securityEventsWorker: ReturnType<typeof createSecurityEventsWorker> | undefined;
  const keys = createKeysService({ db, config, cache: keyCache, rateLimiter });
  // the runs of every job (docs/metrics.md), with METRICS_TOKEN: the web app's jobs on the web app, the backend's on the backend
  const webJobMetrics = config.METRICS_TOKEN ? createJobMetrics() : undefined;
  const backendJobMetrics = config.METRICS_TOKEN ? createJobMetrics() : undefined;
  const { accounts, externalSignIn, passwordReset, securityEvents, mailer } = createIdentityServices({
    deps,
    log,
    rateLimiter,
    sessionCache,
    onSecurityEventRecorded: () => securityEventsWorker?.wake(),
    onReclaimed: (userId) => keys.removeAll(userId),
  });
  // the ledger is every wallet balance's one writer (docs/payments.md); an admin credits through it
  const ledger = createLedgerService({ db });
  const sessionWallet = createSessionWalletService({ db, config, encryptionKey: deps.secrets.walletEncryptionKey, ledger });
  const admin = createAdminService({
    db,
    publicUrl: config.PUBLIC_URL,
    sessionCache,
    wallets: sessionWallet,
    ledger,
    resetLinks: createAdminResetLinks({ db, publicUrl: config.PUBLIC_URL, ...(deps.now ? { now: deps.now } : {}) }),
    ...(deps.now ? { now: deps.now } : {}),
  });
  const health = createHealthService({ metrics: deps.metrics ?? createPlatformMetrics() });
  const workflows = createWorkflowsService({ db });
  // thresholds on balances and agents' spend, told by email and webhook (docs/payments.md "Spend alerts")
  const spendAlerts = createSpendAlerts({
    db,
    mail: mailer ? (m) => mailer.send(m) : undefined,
    allowPrivateWebhooks: config.UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS,
    publicUrl: config.PUBLIC_URL,
  });
  const heartbeat = createHeartbeatService({ db, ...(deps.now ? { now: deps.now } : {}) });
  const bridge = createBridgeService({ db, ...(deps.now ? { now: deps.now } : {}) });
  // the outside services a user reaches through the platform (trading, hosting status, custodial wallets)
  const { trading, hostingStatus, cdpWallets } = createIntegrationServices(deps);
  const agentConfig = createConfigService({ db, secretsKey: deps.secrets.secretsEncryptionKey, ...(deps.now ? { now: deps.now } : {}) });
  const hostingMcp = createHostingMcpService(deps.now ? { now: deps.now } : {});
  // GET /metrics (docs/metrics.md), only with METRICS_TOKEN: the AI layer reports provider attempts to it
  const providerMetrics = config.METRICS_TOKEN ? createProviderMetrics() : undefined;
  const ai = createAiService({
    config,
    db,
    rateLimiter,
    providers: deps.aiProviders,
    usage: deps.aiUsageStore,
    logger: deps.logger,
    now: deps.now,
    providerObserver: providerMetrics?.observer,
    // AI_BILLING=balance: a user's model calls are paid from their session wallet's ledger balance
    billing: {
      addressOf: async (userId) => (await sessionWallet.address(userId)) ?? undefined,
      charge: (trx, charges) => ledger.chargeUsage(trx, charges),
    },
  });
  // the backend's workers, once startWorkers() ran: the job runner's queues and the watchdog's probe loop
  let workers: ReturnType<typeof createBackendWorkers> | undefined;
  let noncePurge: NodeJS.Timeout | undefined;
  let unwatchExits: (() => void) | undefined;
  // the agents and what talks to them (docs/architecture.md "Reaching an agent"): built in src/platform/agents.ts
  const ag = createAgentServices({
    deps,
    log,
    ai,
    redisCache,
    wakeDeployments: () => workers?.deployments.wake(),
    checkSoon: (agentId) => watchdog.checkSoon(agentId, 'unreachable'),
  });
  const { driver, agents, deployments, agentClient, conversations } = ag;
  // payments (docs/payments.md)
  const { topUp, subscriptions, paymentSessions, gateway } = createPaymentServices({
    deps,
    log,
    ledger,
    ai,
    agentClient,
    rateLimiter,
    sessionCache,
  });
  let sessionExpiry: NodeJS.Timeout | undefined;
  const pools = { owner: db.pool, ...(db.requestPool && { request: db.requestPool }) };
  const metrics = providerMetrics && { counts: createPlatformCounts(db), pools, provider: providerMetrics, jobs: backendJobMetrics };
  const appOptions = deps.logger ? { logger: deps.logger } : {};
  // §3 watchdog: decisions in the service, the loop in a worker started with the other workers
  const watchdogChannels = channelsFromConfig(config);
  const watchdog = createWatchdogService({
    db,
    driver,
    agents: createAgentDirectory(db, ag.agentsDeps.locks),
    settings: { ...watchdogSettingsFromConfig(config), ...deps.watchdogSettings },
    channels: watchdogChannels.map((c) => c.name),
    redeploy: (agent, signal) => deployments.runJob(agent, signal, { repair: true }),
    wake: () => workers?.watchdog?.wake(),
    containerHealth: { retries: config.CONTAINER_HEALTH_RETRIES, intervalMs: config.CONTAINER_HEALTH_INTERVAL_MS },
    hostingAvailable: () => config.configured.hosting,
  });
  const underground = createUnderground({ config, db, secrets: deps.secrets, ledger }); // §4.15 events, agent wallets, royalty splits
  // §4.15 bus: sending records the message and its delivery jobs, the worker delivers them
  const undergroundBus = createUndergroundBus({ config, db, rateLimiter, onEnqueued: () => workers?.undergroundBus.wake() });
  // §4.6 calendar connections, when the OAuth client is configured
  const calendar = config.configured.calendar
    ? createCalendarService({
        db,
        config,
        secretsKey: deps.secrets.secretsEncryptionKey,
        log,
        ...(deps.now ? { now: () => deps.now!().getTime() } : {}),
      })
    : undefined;

  // the services the web app is built with, which the platform also hands out (tests and scripts call them)
  const webServices = {
    chat: ag.chat,
    agentsWeb: ag.agentsWeb,
    admin,
    topUp,
    subscriptions,
    ai,
    accounts,
    passwordReset,
    health,
    trading,
    sessionWallet,
    hostingStatus,
    agentConfig,
    keys,
    workflows,
    heartbeat,
    bridge,
    watchdog,
    securityEvents,
    spendAlerts,
  };
  return {
    services: {
      ...webServices,
      agents,
      deployments,
      agentCallbacks: ag.agentCallbacks,
      driver,
      hostingMcp,
      ledger,
      paymentSessions,
      gateway,
    },
    buildWebApp: () =>
      buildWebApp(
        config,
        {
          ...webServices,
          usageReport: createUsageReport({ db, ...(deps.now ? { now: deps.now } : {}) }),
          files: ag.files,
          ...(calendar ? { calendar } : {}),
          cdpWallets,
          ...conversations.web,
          agentClient,
          agentMessages: ag.agentMessages,
          stablecoinBalances: createStablecoinBalanceReader({ rpcUrl: config.TEMPO_RPC_URL, testnet: config.TEMPO_TESTNET }),
          externalSignIn,
          payments: { sessions: paymentSessions, gateway },
          x402: createX402({ config, db, ledger }),
          jobMetrics: webJobMetrics,
        },
        appOptions,
      ),
    buildBackendApp: () =>
      buildBackendApp(
        config,
        {
          agents,
          deployments,
          agentCallbacks: ag.agentCallbacks,
          ai,
          keys,
          hostingMcp,
          watchdog,
          files: ag.files,
          underground,
          undergroundBus,
          storedPlans: ag.storedPlans,
          metrics,
        },
        appOptions,
      ),
    /**
     * Starts the backend's workers (backend processes; docs/architecture.md "Workers"): the
     * deployment jobs (after re-deploying the agents that should run), the watchdog, heartbeats
     * and Underground bus deliveries.
     */
    async startWorkers() {
      await driver.ready?.(); // a container driver's settings (KUBECONFIG, DOCKER_HOST) are checked before any job runs
      // agents that still name a seed model get the model it maps to, before any of them is started
      await agents.settleSeedModels(log).catch((err: Error) => log.warn({ err }, 'agent models not settled'));
      workers ??= createBackendWorkers({
        deps,
        config,
        log,
        metrics: backendJobMetrics,
        deployments,
        watchdog,
        watchdogChannels,
        heartbeat,
        agentClient,
        bus: undergroundBus,
        spendAlerts,
        idleAgents: ag.idleAgents,
      });
      await workers.start();
      // the platform sees an agent's process end itself, and has the watchdog check it at once
      // rather than at its next probe (docs/watchdog.md "Checks on demand")
      unwatchExits ??= driver.watchExits?.((agentId, exit) => {
        log.warn({ agentId, ...exit }, 'agent process exited without being stopped');
        void watchdog.checkSoon(agentId, 'exit').catch((err: Error) => log.warn({ agentId, err }, 'watchdog check request failed'));
      });
    },
    startChannels: conversations.start,
    /** the watchdog loop of this process, once startWorkers() ran (tests inspect its holder id) */
    get watchdogWorker() {
      return workers?.watchdog;
    },
    /** the heartbeat job of this process, once startWorkers() ran */
    get heartbeatWorker() {
      return workers?.heartbeats;
    },
    /**
     * Jobs of the web app (every web replica may run them; each is idempotent): purge spent SIWE
     * nonces and sessions past their expiry (docs/security.md), and act on recorded security events
     * (§6; each taken FOR UPDATE SKIP LOCKED).
     */
    startWebJobs() {
      securityEventsWorker ??= createSecurityEventsWorker({
        events: securityEvents,
        logger: log,
        metrics: webJobMetrics?.observer,
        pollMs: deps.securityEvents?.pollMs,
        retryBaseMs: deps.securityEvents?.retryBaseMs,
      });
      void securityEventsWorker.start();
      if (noncePurge) return;
      const purge = () => {
        void accounts.purgeExpiredNonces().catch((err) => log.warn({ err }, 'nonce purge failed'));
        void accounts.purgeExpiredSessions().catch((err) => log.warn({ err }, 'expired session purge failed'));
        void passwordReset.purgeExpired().catch((err) => log.warn({ err }, 'password reset link purge failed'));
      };
      purge();
      noncePurge = setInterval(purge, config.NONCE_PURGE_INTERVAL_MS);
      noncePurge.unref();
      // payment sessions past their expiry return their remainder to the wallet (docs/payments.md);
      // the schedule is each session's expires_at in PostgreSQL, SKIP LOCKED across replicas
      const expire = () => void paymentSessions.expireDue().catch((err) => log.warn({ err }, 'payment session expiry failed'));
      expire();
      sessionExpiry = setInterval(expire, config.PAYMENT_SESSION_EXPIRY_INTERVAL_MS);
      sessionExpiry.unref();
    },
    async close() {
      if (noncePurge) clearInterval(noncePurge);
      if (sessionExpiry) clearInterval(sessionExpiry);
      await securityEventsWorker?.stop();
      unwatchExits?.();
      await conversations.stop();
      await workers?.stop();
      await ag.idleAgents.close();
      await undergroundBus.close();
      if (ag.ownsDriver) {
        await driver.shutdown().catch((err) => log.warn({ err }, 'hosting driver shutdown failed'));
        // where this process ran the deployment worker, agents stopped with it stop reading `running`
        if (workers)
          await deployments
            .settleAfterShutdown()
            .then(
              (n) =>
                n > 0 &&
                log.info({ agents: n }, `stopped ${n} agent${n === 1 ? '' : 's'} with the platform; the next start starts them again`),
            )
            .catch((err: Error) => log.warn({ error: err.message }, 'agent status not recorded'));
      }
      for (const closing of [ai, passwordReset, rateLimiter, sessionCache, keyCache, ag.agentKeyCache]) await closing.close();
    },
  };
}

export type Platform = ReturnType<typeof createPlatform>;
