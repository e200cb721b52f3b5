/**
 * The `agent` plugin's first choice (§4.8 "orchestrator"): the caller's own running agent,
 * reached on its gateway's OpenAI-compatible `POST /v1/chat/completions` (§8 agent container
 * settings) through the agent gateway client. Undefined when the caller has no running agent.
 * A caller with an API key limited to some agents (docs/payments.md "API keys") reaches only one
 * of those, and is refused 404 when none of them runs: never another agent, never the AI layer
 * in the agent's place.
 */
import { notFound } from '../../../lib/errors.ts';
import type { AgentClient } from '../../agents/index.ts';
import type { AgentChat } from './plugins.service.ts';

export function createAgentChat(deps: { agentClient: Pick<AgentClient, 'targets' | 'chatCompletion'>; timeoutMs: number }): AgentChat {
  return async (caller, messages, signal) => {
    const agentIds = caller.key?.agentIds ?? null;
    const target = await deps.agentClient.targets.running(caller.userId, agentIds);
    if (!target) {
      if (agentIds) throw notFound('No agent this API key may reach is running');
      return undefined;
    }
    return deps.agentClient.chatCompletion(target, messages, { signal, timeoutMs: deps.timeoutMs, keyId: caller.key?.id });
  };
}
