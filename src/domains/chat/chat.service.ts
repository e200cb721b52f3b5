/**
 * Talking to an agent through the platform (docs/agents.md "Talk to your agent"):
 *
 * - §4.8 `POST /api/gateway/chat`: one WebSocket per request to the agent's gateway `/ws`
 *   (`{type:'chat', content}` → `{type:'reply', content}`), closed after the reply, 30 s timeout.
 *   The runtime stores that turn itself (agent callbacks), as it does for every WebSocket turn.
 * - §4.18 `POST /api/chat`: the agent's OpenAI-compatible `/v1/chat/completions`, always asked to
 *   stream so the caller can get Server-Sent Events; the platform assembles the text and stores
 *   the turn (the runtime does not report streamed completions, so nothing is stored twice).
 * - Streamed completions through the gateway proxy are stored the same way (`recordTurn`).
 */
import WebSocket from 'ws';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { AppError } from '../../lib/errors.ts';
import { agentsRepo } from '../agents/agents.repo.ts';
import type { AgentTarget, AgentTargets } from './agent-target.ts';
import { createCompletionText, STORED_ANSWER_MAX_CHARS } from './completion-text.ts';

export type ChatMessage = { role: 'system' | 'user' | 'assistant'; content: string };
export type ChatInput = { agentId?: string | undefined; messages: ChatMessage[]; model?: string | undefined };
export type ChatResult = { reply: string; agentId: string; agentName: string; responseMs: number };
/** One exchange to store: the last question and the whole answer. */
export type Turn = { agentId: string; question: string; askedAt: Date; answer: string; responseMs: number; platform?: string };

const notRunning = (t: AgentTarget) =>
  new AppError('AGENT_NOT_RUNNING', `Agent ${t.agent.name} is ${t.agent.status}; start it first`, { status: t.agent.status });
const agentFailed = (detail: string) => new AppError('AGENT_UNAVAILABLE', `The agent did not answer: ${detail}`);

export type ChatDeps = {
  db: Db;
  targets: AgentTargets;
  /** §8 chat WebSocket timeout (30 s) */
  wsTimeoutMs?: number;
  /** how long a REST chat may wait for the agent's first byte and between chunks */
  restTimeoutMs?: number;
};

export function createChatService(deps: ChatDeps) {
  const wsTimeoutMs = deps.wsTimeoutMs ?? LIMITS.chatWebSocketTimeoutMs;
  const restTimeoutMs = deps.restTimeoutMs ?? 120_000;

  /** §4.8: one WebSocket, one chat frame, the first reply or error frame, then close. */
  function viaWebSocket(t: AgentTarget, message: string, sessionKey: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const url = `${t.baseUrl.replace(/^http/, 'ws')}/ws`;
      const socket = new WebSocket(url, { headers: { authorization: `Bearer ${t.token}` }, handshakeTimeout: wsTimeoutMs });
      let settled = false;
      const finish = (err: AppError | undefined, reply?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.removeAllListeners('message');
        socket.on('error', () => {});
        socket.close();
        if (err) reject(err);
        else resolve(reply!);
      };
      const timer = setTimeout(
        () => finish(new AppError('AGENT_TIMEOUT', `The agent did not reply within ${Math.round(wsTimeoutMs / 1000)} seconds`)),
        wsTimeoutMs,
      );
      socket.on('open', () => socket.send(JSON.stringify({ type: 'chat', content: message, sessionKey })));
      socket.on('message', (raw: Buffer) => {
        let frame: { type?: unknown; content?: unknown; error?: unknown };
        try {
          frame = JSON.parse(raw.toString('utf8'));
        } catch {
          return;
        }
        if (frame.type === 'reply' && typeof frame.content === 'string') finish(undefined, frame.content);
        else if (frame.type === 'error')
          finish(new AppError('AGENT_ERROR', typeof frame.error === 'string' ? frame.error : 'The agent answered with an error'));
      });
      socket.on('unexpected-response', (_req, res) => {
        res.resume();
        finish(new AppError('AGENT_UNAVAILABLE', `The agent's gateway refused the connection (${res.statusCode})`, undefined, 500));
      });
      socket.on('error', (err) => finish(new AppError('AGENT_UNAVAILABLE', `Could not reach the agent: ${err.message}`, undefined, 500)));
      socket.on('close', () =>
        finish(new AppError('AGENT_UNAVAILABLE', 'The agent closed the connection without replying', undefined, 500)),
      );
    });
  }

  /**
   * Streams a completion from the agent, calling `onDelta` with each piece of text, and returns
   * the whole text. SSE per the OpenAI wire format: `data: {json}` events, `data: [DONE]`.
   */
  async function streamCompletion(
    t: AgentTarget,
    input: ChatInput,
    onDelta: (text: string) => void,
    signal?: AbortSignal,
  ): Promise<string> {
    let res: Response;
    const abort = AbortSignal.any([AbortSignal.timeout(restTimeoutMs), ...(signal ? [signal] : [])]);
    try {
      res = await fetch(`${t.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.token}`, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ messages: input.messages, stream: true, ...(input.model ? { model: input.model } : {}) }),
        signal: abort,
      });
    } catch (err) {
      throw agentFailed((err as Error).name === 'TimeoutError' ? 'timed out' : 'unreachable');
    }
    if (!res.ok || !res.body) {
      let detail = `HTTP ${res.status}`;
      try {
        const body = (await res.json()) as { error?: { message?: unknown } | string };
        const m = typeof body.error === 'string' ? body.error : body.error?.message;
        if (typeof m === 'string') detail = m.slice(0, 500);
      } catch {
        // not JSON: the status says enough
      }
      throw agentFailed(detail);
    }
    const reader = createCompletionText();
    const read = (pieces: string[]) => {
      for (const piece of pieces) onDelta(piece);
      if (reader.error) throw agentFailed(reader.error);
    };
    try {
      for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) read(reader.push(bytes));
      read(reader.end());
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw agentFailed((err as Error).name === 'TimeoutError' ? 'timed out' : 'the stream broke off');
    }
    return reader.text;
  }

  /**
   * Stores one exchange: the question with the time it was asked, then the answer (now). The
   * history's order is the order of storing (migration 100), so the question comes first.
   */
  async function recordTurn(userId: string, turn: Turn) {
    await deps.db.withUser(userId, async (trx) => {
      const base = { agentId: turn.agentId, userId, platform: turn.platform ?? 'api' };
      await agentsRepo.insertMessage(trx, {
        ...base,
        sender: 'user',
        content: turn.question.slice(0, STORED_ANSWER_MAX_CHARS),
        createdAt: turn.askedAt,
      });
      await agentsRepo.insertMessage(trx, {
        ...base,
        sender: 'agent',
        content: turn.answer.slice(0, STORED_ANSWER_MAX_CHARS),
        responseMs: turn.responseMs,
      });
    });
  }

  return {
    /** §4.8 POST /api/gateway/chat */
    async gatewayChat(userId: string, input: { message: string; sessionKey: string }) {
      const t = await deps.targets.defaultFor(userId);
      const reply = await viaWebSocket(t, input.message, input.sessionKey);
      return { success: true as const, reply, agentId: t.agent.id, agentName: t.agent.name };
    },

    /** Resolves the agent before any byte is sent, so routes can still answer with a status code. */
    async open(userId: string, agentId: string | undefined) {
      const t = agentId ? await deps.targets.byId(userId, agentId) : await deps.targets.defaultFor(userId);
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
      const reply = await streamCompletion(t, input, onDelta, signal);
      const responseMs = Date.now() - askedAt.getTime();
      const lastUser = input.messages.findLast((m) => m.role === 'user');
      if (lastUser) await recordTurn(userId, { agentId: t.agent.id, question: lastUser.content, askedAt, answer: reply, responseMs });
      return { reply, agentId: t.agent.id, agentName: t.agent.name, responseMs };
    },

    /**
     * Stores a turn the platform passed through without answering it itself: a streamed
     * completion through the gateway proxy, whose answer the runtime does not report.
     */
    recordTurn,
  };
}

export type ChatService = ReturnType<typeof createChatService>;
