/**
 * The `agent` plugin's first choice (§4.8 "orchestrator"): the caller's own running agent,
 * reached on its gateway's OpenAI-compatible `POST /v1/chat/completions` (§8 agent container
 * settings) with the agent's gateway token. Undefined when the caller has no running agent.
 */
import type { Db } from '../../../db/client.ts';
import { decryptSecret } from '../../../lib/crypto.ts';
import { pluginsRepo } from './plugins.repo.ts';
import type { AgentChat } from './plugins.ts';

export function createAgentChat(deps: { db: Db; secretsKey: Buffer; timeoutMs: number }): AgentChat {
  return async (userId, messages, signal) => {
    const agent = await pluginsRepo.runningAgent(deps.db.kysely, userId);
    if (!agent) return undefined;
    const token = decryptSecret(deps.secretsKey, agent.gateway_token_enc);
    const res = await fetch(`${agent.gateway_url.replace(/\/+$/, '')}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages, stream: false }),
      signal: AbortSignal.any([signal, AbortSignal.timeout(deps.timeoutMs)]),
    });
    if (!res.ok) {
      await res.body?.cancel().catch(() => {});
      throw new Error(`agent gateway answered ${res.status}`);
    }
    const body = (await res.json()) as { choices?: { message?: { content?: unknown } }[] };
    const content = body.choices?.[0]?.message?.content;
    if (typeof content !== 'string') throw new Error('agent gateway answered without content');
    return content;
  };
}
