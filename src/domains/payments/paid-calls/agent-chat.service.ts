/**
 * The `agent` plugin's first choice (§4.8 "orchestrator"): the caller's own running agent,
 * reached on its gateway's OpenAI-compatible `POST /v1/chat/completions` (§8 agent container
 * settings) through the agent gateway client. Undefined when the caller has no running agent.
 */
import type { AgentClient } from '../../agents/index.ts';
import type { AgentChat } from './plugins.service.ts';

export function createAgentChat(deps: { agentClient: Pick<AgentClient, 'targets' | 'chatCompletion'>; timeoutMs: number }): AgentChat {
  return async (userId, messages, signal) => {
    const target = await deps.agentClient.targets.running(userId);
    if (!target) return undefined;
    return deps.agentClient.chatCompletion(target, messages, { signal, timeoutMs: deps.timeoutMs });
  };
}
