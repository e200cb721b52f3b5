/** The backend app ({backend_url}): bearer-key API for agents, deployments, the AI layer. */
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config/env.ts';
import type { AgentCallbacks, AgentsService, DeploymentJobs } from '../../domains/agents/index.ts';
import type { AiService, StoredPlans } from '../../domains/ai/index.ts';
import type { FilesService } from '../../domains/files/index.ts';
import type { HostingMcpService } from '../../domains/hosting-mcp/index.ts';
import type { KeysService } from '../../domains/keys/index.ts';
import type { BusService, Underground } from '../../domains/underground/index.ts';
import type { WatchdogService } from '../../domains/watchdog/index.ts';
import { type BackendMetricSources, registerBackendMetrics } from '../../lib/metrics.ts';
import { registerAgentKeyAuth } from '../shared/agent-key-auth.ts';
import { type App, createBaseApp, serverSettings } from '../shared/base-app.ts';
import { createBearerAuth } from '../shared/bearer-auth.ts';
import { createAppMetrics } from '../shared/metrics.ts';
import { mountRoutes } from '../shared/routes.ts';
import { agentCallbackRoutes } from './routes/agent-callbacks.routes.ts';
import { backendAgentsRoutes } from './routes/agents.backend.routes.ts';
import { aiRoutes } from './routes/ai.routes.ts';
import { browseRoutes } from './routes/browse.backend.routes.ts';
import { backendHealthRoutes } from './routes/health.backend.routes.ts';
import { hostingMcpRoutes } from './routes/hosting-mcp.routes.ts';
import { backendMetricsRoutes } from './routes/metrics.backend.routes.ts';
import { modelGatewayRoutes } from './routes/model-gateway.routes.ts';
import { undergroundRoutes } from './routes/underground.routes.ts';
import { undergroundBusRoutes } from './routes/underground-bus.routes.ts';
import { backendKeysRoutes } from './routes/validate-key.routes.ts';
import { backendWatchdogRoutes } from './routes/watchdog.backend.routes.ts';

export type BackendServices = {
  /** stored plans for the AI plan middleware (x-user-id naming a platform user) */
  storedPlans?: StoredPlans;
  agents: AgentsService;
  /** §4.18 deployments: requested and read by the agent routes (the worker runs them) */
  deployments: DeploymentJobs;
  /** what agents call back with their own platform key (the agentKey scope and its routes) */
  agentCallbacks: AgentCallbacks;
  ai: AiService;
  keys: KeysService;
  hostingMcp: HostingMcpService;
  /** §3 watchdog state in agent responses and GET /api/agents/:id/watchdog */
  watchdog?: WatchdogService;
  /** §4.17 file explorer over agents' workspaces */
  files?: FilesService;
  /** §4.15 Underground events, agent wallets and royalty splits */
  underground?: Underground;
  /** §4.15 Underground message bus (signed messages, no key) */
  undergroundBus?: BusService;
  /** the backend's own metrics at GET /metrics (docs/metrics.md), when METRICS_TOKEN is set */
  metrics?: BackendMetricSources | undefined;
};

export async function buildBackendApp(
  config: Config,
  services: BackendServices,
  options: { logger?: FastifyBaseLogger } = {},
): Promise<App> {
  const metrics = config.METRICS_TOKEN ? createAppMetrics('backend', config.METRICS_TOKEN) : undefined;
  if (metrics && services.metrics) registerBackendMetrics(metrics.registry, services.metrics);
  const app = await createBaseApp({
    title: 'Agent platform — backend API',
    description:
      'The backend API ({backend_url}). Core routes need `Authorization: Bearer <INTERNAL_API_KEY>`: 401 `Unauthorized` without it, ' +
      '403 `Forbidden` for a wrong key, 500 `Server misconfigured` when the server has no key set.',
    version: '0.1.0',
    ...serverSettings(config),
    serverUrl: config.BACKEND_URL,
    securitySchemes: {
      bearerKey: { type: 'http', scheme: 'bearer' },
      agentKey: { type: 'http', scheme: 'bearer', description: "an agent's own platform key (apk_…), issued at deploy time" },
    },
    ...(options.logger ? { logger: options.logger } : {}),
    ...(metrics ? { metrics } : {}),
  });
  // Route modules (../shared/routes.ts): each scope authenticates every route in it, once. Agents
  // call back with their own scoped key, never INTERNAL_API_KEY; everything else is core (§5).
  await mountRoutes(
    app,
    {
      public: null,
      agentKey: registerAgentKeyAuth(app, (key) => services.agentCallbacks.verifyPlatformKey(key)),
      bearer: createBearerAuth(config.INTERNAL_API_KEY),
      metrics: metrics?.auth ?? null,
    },
    [
      backendHealthRoutes({ config }),
      agentCallbackRoutes({ callbacks: services.agentCallbacks }),
      // the AI gateway agents reach at AGENT_GATEWAY_URL with their own key (docs/agents.md "Model access")
      services.storedPlans &&
        modelGatewayRoutes({
          ai: services.ai,
          storedPlans: services.storedPlans,
          config,
          subscriptionsRequired: config.configured.stripe,
        }),
      // §4.7 backend agents, §4.18 deployments, lifecycle and runtime instances
      backendAgentsRoutes({
        agents: services.agents,
        deployments: services.deployments,
        ...(services.watchdog ? { watchdog: services.watchdog } : {}),
      }),
      services.watchdog && backendWatchdogRoutes({ watchdog: services.watchdog }),
      // §4.9 AI: its plugin is the scope of its per-IP limit, exactly /api/ai/*
      aiRoutes({
        ai: services.ai,
        config,
        ...(services.storedPlans ? { storedPlans: services.storedPlans } : {}),
        subscriptionsRequired: config.configured.stripe,
      }),
      // §4.3 key validation, §4.16 hosting MCP, §4.17 file explorer
      backendKeysRoutes({ keys: services.keys }),
      hostingMcpRoutes({ hostingMcp: services.hostingMcp }),
      services.files && browseRoutes({ files: services.files }),
      // §4.15 Underground (bearer key plus x-user-id)
      services.underground && undergroundRoutes(services.underground),
      // §4.15 bus send: public scope, the message's signature authenticates it
      services.undergroundBus && undergroundBusRoutes({ bus: services.undergroundBus }),
      metrics && backendMetricsRoutes(metrics),
    ],
  );
  return app;
}
