/**
 * An agent's stored conversation (§4.7 GET /api/agents/:id/messages): the one writer of its
 * messages, given to the domains that hold a conversation with an agent (chat, the proxy's turns)
 * so they store through the agents domain instead of reading its repository (docs/architecture.md rule 1).
 */
import type { Db } from '../../db/client.ts';
import { agentMessagesRepo } from './agent-messages.repo.ts';

/**
 * One exchange to store: the last question and the whole answer (each already cut to what is kept).
 * `platform` labels where it came from (dashboard, api, telegram, discord, websocket; default api);
 * `sessionKey` makes it a turn of that conversation session (docs/channels.md "Sessions"): only
 * such turns are ever sent to the model again as history.
 */
export type Turn = {
  agentId: string;
  question: string;
  askedAt: Date;
  answer: string;
  responseMs: number;
  platform?: string;
  sessionKey?: string;
};

export function createAgentMessages(deps: { db: Db }) {
  return {
    /**
     * Stores one exchange: the question with the time it was asked, then the answer (now). The
     * history's order is the order of storing (migration 100), so the question comes first.
     */
    async recordTurn(userId: string, turn: Turn): Promise<void> {
      await deps.db.withUser(userId, async (trx) => {
        const base = { agentId: turn.agentId, userId, platform: turn.platform ?? 'api', sessionKey: turn.sessionKey ?? null };
        await agentMessagesRepo.insertMessage(trx, { ...base, sender: 'user', content: turn.question, createdAt: turn.askedAt });
        await agentMessagesRepo.insertMessage(trx, { ...base, sender: 'agent', content: turn.answer, responseMs: turn.responseMs });
      });
    },
  };
}
export type AgentMessages = ReturnType<typeof createAgentMessages>;
