/**
 * Talking to an agent through the platform (docs/agents.md "Talk to your agent"):
 *
 * - §4.8 `POST /api/gateway/chat`: one WebSocket per request to the agent's gateway `/ws`
 *   (`{type:'chat', content}` → `{type:'reply', content}`), closed after the reply, 30 s timeout.
 *   The runtime stores that turn itself (agent callbacks), as it does for every WebSocket turn.
 * - §4.18 `POST /api/chat`: the agent's OpenAI-compatible `/v1/chat/completions`, always asked to
 *   stream so the caller can get Server-Sent Events; the platform assembles the text and stores
 *   the turn (the runtime does not report streamed completions, so nothing is stored twice).
 * - Streamed completions through the gateway proxy are stored by the proxy itself, cut the same
 *   (src/domains/agents/agent-client/agent-proxy.service.ts).
 */
import { AppError, isAppError } from '../../lib/errors.ts';
import {
  type AgentClient,
  type AgentMessages,
  type AgentTarget,
  type ChatMessage,
  STORED_ANSWER_MAX_CHARS,
  type Turn,
} from '../agents/index.ts';

export type ChatInput = { agentId?: string | undefined; messages: ChatMessage[]; model?: string | undefined };
export type ChatResult = { reply: string; agentId: string; agentName: string; responseMs: number };

const notRunning = (t: AgentTarget) =>
  new AppError('AGENT_NOT_RUNNING', `Agent ${t.agent.name} is ${t.agent.status}; start it first`, { status: t.agent.status });

export type ChatDeps = {
  /** the agent's gateway: targets, WebSocket chat and streamed completions */
  agentClient: AgentClient;
  /** where exchanges are stored (the agents domain's messages) */
  messages: AgentMessages;
};

export function createChatService(deps: ChatDeps) {
  const { agentClient } = deps;

  /** Stores one exchange through the agents domain, each side cut to what a stored message keeps. */
  const recordTurn = (userId: string, turn: Turn) =>
    deps.messages.recordTurn(userId, {
      ...turn,
      question: turn.question.slice(0, STORED_ANSWER_MAX_CHARS),
      answer: turn.answer.slice(0, STORED_ANSWER_MAX_CHARS),
    });

  return {
    /** §4.8 POST /api/gateway/chat */
    async gatewayChat(userId: string, input: { message: string; sessionKey: string }) {
      const t = await agentClient.targets.defaultFor(userId);
      const reply = await agentClient.wsChat(t, input.message, input.sessionKey).catch((err: unknown) => {
        // §4.8 gives this route 500 for an agent that fails, not 502: the same sentence, the code for it
        if (isAppError(err) && err.id === 'AGENT_UNAVAILABLE') throw new AppError('AGENT_ERROR', err.message);
        throw err;
      });
      return { success: true as const, reply, agentId: t.agent.id, agentName: t.agent.name };
    },

    /** Resolves the agent before any byte is sent, so routes can still answer with a status code. */
    async open(userId: string, agentId: string | undefined) {
      const t = agentId ? await agentClient.targets.byId(userId, agentId) : await agentClient.targets.defaultFor(userId);
      if (t.agent.status !== 'running') throw notRunning(t);
      return t;
    },

    /**
     * §4.18 POST /api/chat on an opened target: streams deltas to `onDelta` (may be a no-op) and
     * stores the turn (the last user message and the assembled reply) once the answer is complete.
     */
    async complete(
      userId: string,
      t: AgentTarget,
      input: ChatInput,
      onDelta: (text: string) => void,
      signal?: AbortSignal,
    ): Promise<ChatResult> {
      const askedAt = new Date();
      const reply = await agentClient.streamCompletion(t, input, onDelta, signal);
      const responseMs = Date.now() - askedAt.getTime();
      const lastUser = input.messages.findLast((m) => m.role === 'user');
      if (lastUser) await recordTurn(userId, { agentId: t.agent.id, question: lastUser.content, askedAt, answer: reply, responseMs });
      return { reply, agentId: t.agent.id, agentName: t.agent.name, responseMs };
    },
  };
}

export type ChatService = ReturnType<typeof createChatService>;
