/**
 * The agents and what talks to them (docs/architecture.md "Reaching an agent", "Two requests, top
 * to bottom"): the hosting driver, the agents domain's three services (records and lifecycle,
 * deployment jobs, agent callbacks), the one agent client (waking sleeping agents, counting their
 * traffic), the stored conversation, chat and sessions with the platform's channels, and the web
 * side of provisioning. platform.ts builds them through this one call; what runs later (the
 * workers, the watchdog) is reached through the two callbacks it passes.
 */
import type { AgentsDeps } from '../domains/agents/index.ts';
import {
  createAgentCallbacks,
  createAgentClient,
  createAgentMessages,
  createAgentsService,
  createAgentsWebService,
  createBackendClient,
  createDeploymentJobs,
  createHostingDriver,
  createLifecycleLocks,
} from '../domains/agents/index.ts';
import { type AiService, agentModelEnv, createOwnerModels, createStoredPlans } from '../domains/ai/index.ts';
import { createChatService } from '../domains/chat/index.ts';
import { createFilesService } from '../domains/files/index.ts';
import { type CacheOptions, createKeyCache } from '../lib/evicting-cache.ts';
import type { Logger } from '../lib/logger.ts';
import type { PlatformDeps } from '../platform.ts';
import { createConversations } from './conversations.ts';
import { createIdleAgentsWiring } from './idle-agents.ts';

export function createAgentServices(o: {
  deps: PlatformDeps;
  log: Logger;
  ai: AiService;
  redisCache: CacheOptions;
  /** a deployment job was queued: the backend's deployment worker looks now */
  wakeDeployments: () => void;
  /** an agent could not be reached: the watchdog checks it soon (docs/watchdog.md "Checks on demand") */
  checkSoon: (agentId: string) => Promise<unknown>;
}) {
  const { deps, log, ai, redisCache } = o;
  const { config, db } = deps;
  const ownsDriver = !deps.driver;
  const hostingLog = deps.hostingLog ?? ((level, message) => log[level]({ source: 'hosting' }, message));
  const driver = deps.driver ?? createHostingDriver(config, { log: hostingLog });
  // users' stored plans (the AI layer's plan checks, cached 5 s); the model an agent runs reads them afresh (docs/agents.md "Model")
  const storedPlans = createStoredPlans({ db });
  const ownerModels = createOwnerModels({ ai, storedPlans: createStoredPlans({ db, ttlMs: 0 }), config });
  // verified agent platform keys: the AI gateway checks one on every model call
  const agentKeyCache = createKeyCache<{ model: string }>({ ttlMs: config.API_KEY_CACHE_TTL_MS, ...redisCache });
  const files = createFilesService({ db, driver }); // §4.17 file explorer, behind both apps' routes, and provisioning's gitInit
  const agentsDeps: AgentsDeps = {
    db,
    config,
    secrets: deps.secrets,
    driver,
    // the agent's own model access (§8 "model-router key"): the platform's AI gateway with the agent's own
    // platform key, metered against its owner's plan; never ROUTER_API_KEY nor any provider key (docs/agents.md "Model access")
    runtimeEnv: (_agent, { platformApiKey }) => agentModelEnv(ai, config.AGENT_GATEWAY_URL, platformApiKey),
    runtimeChannels: (agentId) => conversations.runtimeChannels(agentId), // OpenClaw's own channels (docs/channels.md)
    platformKeyCache: agentKeyCache,
    chooseModel: ownerModels.choose,
    repositories: files.repositories, // docs/agents.md "A repository from the start"
    onEnqueue: () => o.wakeDeployments(),
    // the lifecycle routes, the deployment jobs and the watchdog's repairs change one agent in turn
    locks: createLifecycleLocks(),
  };
  // three services of the agents domain, each given to what uses it: records and lifecycle (the
  // backend's agent routes), deployment jobs (the worker and the deployment routes), and what
  // agents call back with their own key (the agent-key scope and its routes)
  const agents = createAgentsService(agentsDeps);
  const deployments = createDeploymentJobs(agentsDeps);
  const agentCallbacks = createAgentCallbacks({ db, platformKeyCache: agentKeyCache });
  // idle agents sleep and any call wakes them (docs/agents.md "Idle agents sleep"): the targets wake, the traffic is counted
  const idleAgents = createIdleAgentsWiring({ ...agentsDeps, config }, log);
  // every call to an agent's gateway (docs/architecture.md "Reaching an agent")
  const agentClient = createAgentClient({
    targets: idleAgents.targets,
    traffic: idleAgents.traffic,
    localSocket: (origin) => driver.localGatewaySocket?.(origin),
    // OpenClaw's chat completions take its own model names (docs/agents.md "OpenClaw")
    runtime: config.HOSTING_DRIVER === 'local' ? config.AGENT_RUNTIME : 'builtin',
    // an agent that cannot be reached is checked at once (docs/watchdog.md "Checks on demand")
    onUnreachable: (agentId) =>
      void o.checkSoon(agentId).catch((err: Error) => log.warn({ agentId, err }, 'watchdog check request failed')),
  });
  // an agent's stored conversation: chat, sessions (docs/channels.md) and the gateway proxy store their turns through it
  const agentMessages = createAgentMessages({ db });
  const chat = createChatService({ agentClient, messages: agentMessages });
  const conversations = createConversations({ ...deps, chat, agentClient, messages: agentMessages, log });
  const agentsWeb = createAgentsWebService({
    db,
    config,
    secrets: deps.secrets,
    backend: createBackendClient({ baseUrl: config.BACKEND_URL, apiKey: config.INTERNAL_API_KEY }),
    chooseModel: ownerModels.choose,
    runnableModels: ownerModels.runnable,
    channelTokens: conversations.channelTokens,
    log,
  });
  return {
    driver,
    ownsDriver,
    storedPlans,
    agentKeyCache,
    files,
    agentsDeps,
    agents,
    deployments,
    agentCallbacks,
    idleAgents,
    agentClient,
    agentMessages,
    chat,
    conversations,
    agentsWeb,
  };
}
