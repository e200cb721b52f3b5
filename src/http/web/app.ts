/** The web app ({base_url}): cookie sessions, accounts, dashboard APIs. */
import fastifyCookie from '@fastify/cookie';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config/env.ts';
import type { AccountsService, ExternalSignIn, PasswordResetService } from '../../domains/accounts/index.ts';
import type { AdminService } from '../../domains/admin/index.ts';
import type { ConfigService } from '../../domains/agent-config/index.ts';
import { type AgentClient, type AgentMessages, type AgentsWebService, createAgentProxy } from '../../domains/agents/index.ts';
import type { AiService, UsageReportFn } from '../../domains/ai/index.ts';
import type { BridgeService } from '../../domains/bridge/index.ts';
import type { CalendarService } from '../../domains/calendar/index.ts';
import type { Channels } from '../../domains/channels/index.ts';
import type { ChatService } from '../../domains/chat/index.ts';
import type { FilesService } from '../../domains/files/index.ts';
import type { HealthService } from '../../domains/health/index.ts';
import type { HeartbeatService } from '../../domains/heartbeat/index.ts';
import type { HostingStatusService } from '../../domains/hosting-status/index.ts';
import type { KeysService } from '../../domains/keys/index.ts';
import { createLiveLogs } from '../../domains/logs/index.ts';
import type { PaidCallsService, PaymentSessionsService, SubscriptionsService, TopUpService } from '../../domains/payments/index.ts';
import type { SecurityEventsService } from '../../domains/security-events/index.ts';
import type { SessionWalletService } from '../../domains/session-wallet/index.ts';
import type { Sessions } from '../../domains/sessions/index.ts';
import type { SpendAlerts } from '../../domains/spend-alerts/index.ts';
import type { TradingService } from '../../domains/trading/index.ts';
import type { CdpWalletsService, StablecoinBalanceReader } from '../../domains/wallet/index.ts';
import type { WatchdogService } from '../../domains/watchdog/index.ts';
import type { WorkflowsService } from '../../domains/workflows/index.ts';
import type { X402Service } from '../../domains/x402/index.ts';
import { sha256Base64url } from '../../lib/crypto.ts';
import { createStreamRevoker } from '../../lib/eviction-bus.ts';
import type { JobMetrics } from '../../lib/metrics.ts';
import { type App, createBaseApp, serverSettings } from '../shared/base-app.ts';
import { createBridgeAuth } from '../shared/bridge-auth.ts';
import { createAppMetrics } from '../shared/metrics.ts';
import { createOriginCheck } from '../shared/origin-check.ts';
import { mountRoutes } from '../shared/routes.ts';
import { createAccountGuard, registerSession, SESSION_COOKIE, type SessionAuth } from '../shared/session.ts';
import { accountsRoutes } from './routes/accounts.routes.ts';
import { adminRoutes } from './routes/admin.routes.ts';
import { agentCloneRoutes } from './routes/agent-clone.routes.ts';
import { agentProxyRoutes } from './routes/agent-proxy.routes.ts';
import { agentUsageRoutes } from './routes/agent-usage.routes.ts';
import { agentsRoutes } from './routes/agents.web.routes.ts';
import { alertsRoutes } from './routes/alerts.routes.ts';
import { billingRoutes } from './routes/billing.routes.ts';
import { bridgeRoutes } from './routes/bridge.routes.ts';
import { browseWebRoutes } from './routes/browse.web.routes.ts';
import { calendarRoutes } from './routes/calendar.routes.ts';
import { cdpWalletRoutes } from './routes/cdp-wallet.routes.ts';
import { channelsRoutes } from './routes/channels.routes.ts';
import { chatRoutes } from './routes/chat.routes.ts';
import { configRoutes } from './routes/config.routes.ts';
import { dashboardRoutes } from './routes/dashboard.routes.ts';
import { demoRoutes } from './routes/demo.routes.ts';
import { featuresOf, featuresRoutes } from './routes/features.routes.ts';
import { webHealthRoutes } from './routes/health.web.routes.ts';
import { heartbeatRoutes } from './routes/heartbeat.routes.ts';
import { hostingWebhookRoutes } from './routes/hosting-webhook.routes.ts';
import { identityRoutes } from './routes/identity.routes.ts';
import { instanceRoutes } from './routes/instance.routes.ts';
import { keysRoutes } from './routes/keys.routes.ts';
import { logsRoutes } from './routes/logs.routes.ts';
import { webMetricsRoutes } from './routes/metrics.web.routes.ts';
import { modelPricesRoutes } from './routes/model-prices.routes.ts';
import { paidCallsRoutes } from './routes/paid-calls.routes.ts';
import { passwordResetRoutes } from './routes/password-reset.routes.ts';
import { paymentSessionsRoutes } from './routes/payment-sessions.routes.ts';
import { securityEventsRoutes } from './routes/security-events.routes.ts';
import { sessionWalletRoutes } from './routes/session-wallet.routes.ts';
import { topUpRoutes } from './routes/top-up.routes.ts';
import { tradingRoutes } from './routes/trading.routes.ts';
import { usageRoutes } from './routes/usage.routes.ts';
import { webWatchdogRoutes } from './routes/watchdog.web.routes.ts';
import { workflowsRoutes } from './routes/workflows.routes.ts';
import { x402Routes } from './routes/x402.routes.ts';

export type WebServices = {
  /** the signed-in user's AI usage and cost (GET /api/usage) */
  usageReport?: UsageReportFn;
  /** §4.17 the file explorer for the owner's session (docs/agents.md "File explorer") */
  files?: FilesService;
  /** talking to agents: gateway chat and REST chat (docs/agents.md) */
  chat?: ChatService;
  /** conversation sessions: the dashboard's session behind POST /api/chat `message` (docs/channels.md "Sessions") */
  sessions?: Sessions;
  /** agents' messaging channels (docs/channels.md) */
  channels?: Channels;
  /** §4.4 custodial wallets (CDP) */
  cdpWallets?: CdpWalletsService;
  /** §4.4 stablecoin balances by address (TEMPO_RPC_URL) */
  stablecoinBalances?: StablecoinBalanceReader;
  /** the agents' gateways (the authenticated gateway proxy) */
  agentClient?: AgentClient;
  /** where the gateway proxy stores the turns of streamed chat completions */
  agentMessages?: AgentMessages;
  agentsWeb: AgentsWebService;
  ai: AiService;
  accounts: AccountsService;
  /** password reset by email (docs/security.md "Password reset") */
  passwordReset?: PasswordResetService;
  /** §4.1 sign-in with the identity provider and the code host */
  externalSignIn?: ExternalSignIn;
  health: HealthService;
  workflows: WorkflowsService;
  heartbeat: HeartbeatService;
  bridge: BridgeService;
  trading: TradingService;
  sessionWallet: SessionWalletService;
  hostingStatus: HostingStatusService;
  agentConfig: ConfigService;
  keys: KeysService;
  /** admin rights and plans (docs/admin.md) */
  admin?: AdminService;
  /** card top-ups of wallets (§4.4) */
  topUp?: TopUpService;
  /** plans and subscriptions through the card processor (§2) */
  subscriptions?: SubscriptionsService;
  /** payment sessions and the v1 gateway (docs/payments.md) */
  payments?: { sessions: PaymentSessionsService; gateway: PaidCallsService };
  /** §3 watchdog state in agent responses and GET /api/agents/:id/watchdog */
  watchdog?: WatchdogService;
  /** §4.6 calendar connections (unset without CALENDAR_CLIENT_ID/SECRET: the routes answer 503) */
  calendar?: CalendarService;
  /** §4.1 / §6 security event receivers (RISC) */
  securityEvents?: SecurityEventsService;
  /** §4.11 x402 gateway proxy (without X402_GATEWAY_URL its routes answer 503) */
  x402?: X402Service;
  /** spend alerts (docs/payments.md "Spend alerts") */
  spendAlerts?: SpendAlerts;
  /** the runs of the web app's jobs (security events) at GET /metrics, when METRICS_TOKEN is set (docs/metrics.md) */
  jobMetrics?: JobMetrics | undefined;
};

export async function buildWebApp(config: Config, services: WebServices, options: { logger?: FastifyBaseLogger } = {}): Promise<App> {
  const metrics = config.METRICS_TOKEN ? createAppMetrics('web', config.METRICS_TOKEN) : undefined;
  if (metrics) services.jobMetrics?.registerIn(metrics.registry);
  const app = await createBaseApp({
    title: 'Agent platform — web API',
    description:
      'The web API ({base_url}). Most routes authenticate with the `service-session` cookie set by /api/auth/login or /api/wallet-auth. ' +
      'Errors are JSON `{error}` with `code` where the specification names one.',
    version: '0.1.0',
    ...serverSettings(config),
    serverUrl: config.PUBLIC_URL,
    securitySchemes: {
      sessionCookie: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE },
      bridgeSecret: { type: 'apiKey', in: 'header', name: 'x-bridge-secret' },
      apiKey: { type: 'http', scheme: 'bearer', description: 'One of your `sk_` API keys (POST /api/keys)' },
    },
    ...(options.logger ? { logger: options.logger } : {}),
    ...(metrics ? { metrics } : {}),
  });
  await app.register(fastifyCookie);
  // docs/security.md: state-changing cookie requests and sign-ins only from our own origin
  app.addHook(
    'onRequest',
    createOriginCheck({ publicUrl: config.PUBLIC_URL, allowedOrigins: config.CSRF_ALLOWED_ORIGINS, sessionCookie: SESSION_COOKIE }).hook,
  );
  // Long-lived answers (live logs, the gateway proxy) end when the session or key they were opened
  // with is revoked (docs/agents.md "Agent content and streams"). Sign-out and key deletion
  // through this app tell them at once; with REDIS_URL the caches' evictions from every replica do.
  const revoker = createStreamRevoker({
    async stillValid(userId, credential) {
      if ('session' in credential) return (await services.accounts.sessionUser(credential.session))?.id === userId;
      const key = await services.keys.validate(credential.apiKey);
      return key.valid && key.userId === userId;
    },
    redisUrl: config.REDIS_URL,
    redisTimeoutMs: config.REDIS_TIMEOUT_MS,
  });
  app.addHook('onClose', () => revoker.close());
  app.decorate('streamRevoker', revoker);
  const accounts: AccountsService = {
    ...services.accounts,
    async signOut(token) {
      await services.accounts.signOut(token);
      if (token) revoker.sessionEnded(sha256Base64url(token));
    },
    async revokeAllSessions(userId) {
      await services.accounts.revokeAllSessions(userId);
      revoker.userEvicted(userId);
    },
  };
  // a reset ends every session of the user: the open streams of this process too
  const passwordReset: PasswordResetService | undefined = services.passwordReset && {
    ...services.passwordReset,
    async confirm(token, password) {
      const done = await services.passwordReset!.confirm(token, password);
      revoker.userEvicted(done.userId);
      return done;
    },
  };
  // a provider's first proof of an address ends the sessions opened before it: their open streams too
  const externalSignIn: ExternalSignIn | undefined = services.externalSignIn && {
    ...services.externalSignIn,
    async callback(provider, query, stateCookie, meta) {
      const step = await services.externalSignIn!.callback(provider, query, stateCookie, meta);
      if (step.endedSessionsOf) revoker.userEvicted(step.endedSessionsOf);
      return step;
    },
  };
  const keys: KeysService = {
    ...services.keys,
    async remove(userId, id) {
      await services.keys.remove(userId, id);
      revoker.keyDeleted();
    },
  };
  const session: SessionAuth = registerSession(app, accounts, { secure: config.secureCookies });
  // live logs: one reader per watched agent in this web process, released with its last stream
  const live = createLiveLogs({
    fetch: async (userId, agentId) =>
      (await services.agentsWeb.logs({ id: userId, email: '', isAdmin: false }, agentId, { limit: 100 })).logs,
    ...(config.LIVE_LOGS_INTERVAL_MS ? { intervalMs: config.LIVE_LOGS_INTERVAL_MS } : {}),
  });
  app.addHook('onClose', async () => live.close());
  app.decorate('liveLogs', live);

  // the gateway proxy to agents (docs/agents.md "Talk to your agent"): its streams and sockets end with their credential
  const agentClient = services.agentClient;
  const platformOrigins = [config.PUBLIC_URL, ...(config.CSRF_ALLOWED_ORIGINS ?? [])];

  // Route modules (../shared/routes.ts): each scope authenticates every route in it, once
  const scopes = {
    public: null,
    session: session.guard,
    admin: session.adminGuard,
    account: createAccountGuard(session, keys),
    bridge: createBridgeAuth(config.BRIDGE_SECRET),
    metrics: metrics?.auth ?? null,
  };
  await mountRoutes(app, scopes, [
    accountsRoutes({ accounts, session }),
    passwordReset && passwordResetRoutes({ passwordReset }),
    externalSignIn && identityRoutes({ signIn: externalSignIn, session, secure: config.secureCookies }),
    webHealthRoutes({ health: services.health }),
    featuresRoutes({ features: featuresOf(config) }),
    services.admin && adminRoutes({ admin: services.admin }),
    modelPricesRoutes({ ai: services.ai, billing: config.AI_BILLING }),
    services.topUp && topUpRoutes({ topUp: services.topUp }),
    services.subscriptions && billingRoutes({ subscriptions: services.subscriptions }),
    agentsRoutes({ agents: services.agentsWeb, ...(services.watchdog ? { watchdog: services.watchdog } : {}) }),
    agentCloneRoutes(),
    services.watchdog && webWatchdogRoutes({ watchdog: services.watchdog }),
    instanceRoutes({ agents: services.agentsWeb }),
    demoRoutes({ ai: services.ai }),
    workflowsRoutes({ workflows: services.workflows }),
    heartbeatRoutes({ heartbeat: services.heartbeat }),
    bridgeRoutes({ bridge: services.bridge }),
    configRoutes({ config: services.agentConfig }),
    keysRoutes({ keys }),
    tradingRoutes({ trading: services.trading }),
    sessionWalletRoutes({
      sessionWallet: services.sessionWallet,
      ...(services.stablecoinBalances
        ? { balanceByAddress: (_request: unknown, address: string) => services.stablecoinBalances!(address) }
        : {}),
    }),
    services.payments && paymentSessionsRoutes({ sessions: services.payments.sessions }),
    services.payments && paidCallsRoutes({ gateway: services.payments.gateway }),
    services.cdpWallets && cdpWalletRoutes({ wallets: services.cdpWallets }),
    services.chat && services.sessions && chatRoutes({ chat: services.chat, sessions: services.sessions }),
    services.channels && channelsRoutes({ channels: services.channels, agents: services.agentsWeb }),
    logsRoutes({ agents: services.agentsWeb, live, session, revoker }),
    agentClient &&
      services.agentMessages &&
      agentProxyRoutes({
        proxy: createAgentProxy({
          agentClient,
          revoker,
          platformOrigins,
          messages: services.agentMessages,
          // a key whose monthly budget is spent is refused before its request reaches the agent (docs/payments.md "API keys")
          keyBudget: (userId, keyId) => services.ai.keyBudgets.check(userId, keyId),
        }),
        agentsDomain: config.AGENTS_DOMAIN,
        allowedOrigins: platformOrigins,
        close: () => agentClient.close(),
      }),
    hostingWebhookRoutes({ hostingStatus: services.hostingStatus }),
    services.securityEvents && securityEventsRoutes({ events: services.securityEvents }),
    services.usageReport && usageRoutes({ report: services.usageReport }),
    services.usageReport && agentUsageRoutes({ report: services.usageReport, budgets: services.ai.budgets }),
    services.spendAlerts && alertsRoutes({ alerts: services.spendAlerts }),
    services.files && browseWebRoutes({ files: services.files }),
    calendarRoutes({ calendar: services.calendar, session, secure: config.secureCookies }),
    services.x402 && x402Routes({ x402: services.x402 }),
    // the dashboard (dashboard/, docs/dashboard.md): static pages, hidden from the OpenAPI description
    dashboardRoutes({ distDir: config.DASHBOARD_DIR }),
    metrics && webMetricsRoutes(metrics),
  ]);
  return app;
}
