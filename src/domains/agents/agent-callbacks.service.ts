/**
 * What agents call back with their own platform key (never INTERNAL_API_KEY): storing the chat
 * messages they report, and telling which agent a key belongs to. Built in src/platform.ts and given
 * to the agent-key scope and the callback routes (src/http/backend/routes/agent-callbacks.routes.ts).
 */
import { sha256Hex } from '../../lib/crypto.ts';
import { agentMessagesRepo } from './agent-messages.repo.ts';
import type { AgentsDeps } from './agent-records.service.ts';
import { agentsRepo } from './agents.repo.ts';
import { PLATFORM_KEY_PREFIX } from './credentials.rules.ts';

/** The agent a platform key belongs to, and its owner. */
/** An agent calling back with its platform key, and the model it runs (its record's: docs/agents.md "Model"). */
export type AgentCaller = { agentId: string; userId: string; model: string };

export function createAgentCallbacks(deps: Pick<AgentsDeps, 'db' | 'platformKeyCache'>) {
  const { db } = deps;
  return {
    /**
     * Stores chat messages an agent reports with its own platform key (the runtime calls this
     * after each answered turn). `caller` is what verifyPlatformKey made of that key: it decides
     * agent and owner; nothing in the body can name another agent.
     */
    async recordAgentMessages(
      caller: AgentCaller,
      messages: {
        sender: 'user' | 'agent' | 'system';
        content: string;
        platform?: string | undefined;
        responseMs?: number | undefined;
        failed?: boolean | undefined;
      }[],
    ): Promise<{ agentId: string; stored: number }> {
      await db.withUser(caller.userId, async (trx) => {
        for (const m of messages) {
          await agentMessagesRepo.insertMessage(trx, {
            agentId: caller.agentId,
            userId: caller.userId,
            sender: m.sender,
            content: m.content,
            ...(m.platform ? { platform: m.platform } : {}),
            responseMs: m.responseMs ?? null,
            failed: m.failed ?? false,
          });
        }
      });
      return { agentId: caller.agentId, stored: messages.length };
    },

    /**
     * The agent a per-agent platform key belongs to, or null (for routes agents call back, and the
     * AI gateway on every model call). A verified key is cached for API_KEY_CACHE_TTL_MS so a call
     * costs no database read; rotating, revoking (stop) or deleting evicts it at once, in every
     * replica with REDIS_URL (the same cache and guarantees as `sk_` keys, src/lib/evicting-cache.ts).
     * The answer is given at once (no promise) when the format is wrong or the key is cached: the
     * gateway's hook then decides without a promise (docs/benchmarks.md "AI proxy"); a promise only
     * for the database read.
     */
    verifyPlatformKey(key: string): AgentCaller | null | Promise<AgentCaller | null> {
      if (!key || key.length > 200 || !key.startsWith(PLATFORM_KEY_PREFIX)) return null;
      const hex = sha256Hex(key);
      const hit = deps.platformKeyCache?.get(hex);
      if (hit) return { agentId: hit.keyId, userId: hit.userId, model: hit.profile.model };
      return agentsRepo.findByPlatformKeyHash(db.kysely, Buffer.from(hex, 'hex')).then((r) => {
        if (!r) return null;
        deps.platformKeyCache?.set(hex, { keyId: r.agent_id, userId: r.user_id, profile: { model: r.model } });
        return { agentId: r.agent_id, userId: r.user_id, model: r.model };
      });
    },
  };
}

export type AgentCallbacks = ReturnType<typeof createAgentCallbacks>;
