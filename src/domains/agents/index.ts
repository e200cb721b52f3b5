/**
 * Agents (§3, §4.7, §4.18): their records, lifecycle and deployments, the hosting drivers, the platform's client of their gateways, and what they call back with.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { type AgentCallbacks, type AgentCaller, createAgentCallbacks } from './agent-callbacks.service.ts';
export { type AgentClient, type ChatMessage, createAgentClient } from './agent-client/agent.client.ts';
export { CHAT_BODY_MAX_DEPTH } from './agent-client/agent-model.rules.ts';
export { type AgentProxy, createAgentProxy, PROXY_SOCKET_LIMITS } from './agent-client/agent-proxy.service.ts';
export { containerHealth, probeHealthz } from './agent-client/health-probe.client.ts';
export { STORED_ANSWER_MAX_CHARS } from './agent-client/proxied-turn.rules.ts';
export { type AgentTarget, createAgentTargets } from './agent-client/targets.service.ts';
export { type AgentMessages, createAgentMessages, type Turn } from './agent-messages.service.ts';
export { type AgentsDeps, createAgentDirectory, findOwnAgent } from './agent-records.service.ts';
export * from './agents.backend.schemas.ts';
export { type AgentsService, createAgentsService } from './agents.backend.service.ts';
export { type AgentRow, agentsRepo } from './agents.repo.ts';
export { agentName, configObject } from './agents.schemas.ts';
export {
  agentMessagesPage,
  agentModels,
  agentStats,
  messagesQuery,
  provisionBody,
  provisioned,
  renamedAgent,
  webAgent,
  webAgentList,
  webLogsQuery,
} from './agents.web.schemas.ts';
export { type AgentsWebService, createAgentsWebService, type WebUser } from './agents.web.service.ts';
export { createPlatformCounts } from './agents-metrics.service.ts';
export { createBackendClient } from './backend.client.ts';
export { maskChannelSecrets, sealChannelSecrets } from './channel-secrets.rules.ts';
export { type ClaimedJob, createDeploymentJobs, type DeploymentJobs, type DeployResult } from './deployments/deployments.service.ts';
export {
  AgentNotDeployedError,
  type AgentWorkspace,
  type ContainerStatus,
  type HostingDriver,
  HostingUnavailableError,
} from './drivers/driver.contract.ts';
export { createHostingDriver } from './drivers/driver-registry.service.ts';
export { createAgentTraffic, noTraffic } from './idle/agent-traffic.service.ts';
export { createIdleAgents, type IdleAgents } from './idle/idle-agents.service.ts';
export { createLifecycleLocks } from './lifecycle-locks.service.ts';
