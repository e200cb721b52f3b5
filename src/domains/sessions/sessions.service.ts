/**
 * Conversation sessions owned by the platform (docs/channels.md "Sessions"; §2 `session.dmScope`
 * per-channel-peer and `session.resetTriggers`; §8 session tokens). A session is (agent, key): the
 * key is `dashboard` for the owner's chat on the dashboard, `<channel>:<peer id>` for one person on
 * a messaging channel. The platform stores each session's turns (labelled with their source) and
 * sends the agent's OpenAI-compatible endpoint the session's history with each new message; the
 * endpoint itself stays stateless, so an SDK client that calls it sends its own history and its
 * calls are never part of a session.
 *
 * A session holds at most 100,000 tokens and is compacted at 80% before the next message: the
 * oldest turns are replaced by a summary the agent's own model writes (one more call through the
 * same endpoint), so a long conversation keeps going (session-history.rules.ts).
 */
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { notFound } from '../../lib/errors.ts';
import type { AgentClient, AgentMessages, AgentTarget } from '../agents/index.ts';
import { STORED_ANSWER_MAX_CHARS } from '../agents/index.ts';
import { compactionPlan, isResetWord, resetTriggers, type SessionTurn, sessionMessages, summaryRequest } from './session-history.rules.ts';
import { sessionsRepo } from './sessions.repo.ts';

type SessionsDeps = {
  db: Db;
  /** resolves the owner's agent and refuses one that is not running (the chat domain's `open`, so chat and channels reach an agent the same way) */
  open: (userId: string, agentId: string) => Promise<AgentTarget>;
  agentClient: Pick<AgentClient, 'streamCompletion'>;
  messages: Pick<AgentMessages, 'recordTurn'>;
};

type ConverseInput = {
  /** `dashboard` or `<channel>:<peer id>` */
  key: string;
  /** the label stored with the turn: dashboard, telegram, discord… */
  source: string;
  text: string;
  model?: string | undefined;
  onDelta?: (text: string) => void;
  signal?: AbortSignal | undefined;
  /** the agent already opened by the caller (a route that must answer a refusal before it streams) */
  target?: AgentTarget;
};

type ConverseResult = {
  reply: string;
  agentId: string;
  agentName: string;
  responseMs: number;
  /** the message was a reset word: the session was started over and the agent was not called */
  reset: boolean;
  /** the session was compacted before this message */
  compacted: boolean;
};

const RESET_REPLY = 'Started a new session: earlier messages are no longer part of this conversation.';

const toTurn = (m: { seq: number; sender: string; content: string }): SessionTurn => ({
  seq: m.seq,
  role: m.sender === 'user' ? 'user' : 'assistant',
  content: m.content,
});

export function createSessions(deps: SessionsDeps) {
  const { db } = deps;
  // one message of a session at a time in this process, so a turn is stored before the next one reads the history
  const running = new Map<string, Promise<unknown>>();
  const serially = <T>(id: string, fn: () => Promise<T>): Promise<T> => {
    const before = running.get(id) ?? Promise.resolve();
    const next = before.then(fn, fn);
    const settled = next.catch(() => {});
    running.set(id, settled);
    void settled.then(() => running.get(id) === settled && running.delete(id));
    return next;
  };

  async function reset(userId: string, agentId: string, key: string): Promise<void> {
    await db.withUser(userId, (trx) => sessionsRepo.reset(trx, { agentId, userId, key }));
  }

  /** Compacts the session if it reached 80% of the §8 limit; returns its summary and turns after that. */
  async function compactIfFull(userId: string, t: AgentTarget, key: string, text: string, model: string | undefined) {
    const agentId = t.agent.id;
    const { state, turns } = await db.withUser(userId, async (trx) => {
      const state = await sessionsRepo.findSession(trx, agentId, key);
      return { state, turns: (await sessionsRepo.turns(trx, agentId, key, state?.since_seq ?? 0)).map(toTurn) };
    });
    const summary = state?.summary ?? null;
    const plan = compactionPlan(summary, turns, text);
    if (!plan) return { summary, turns, compacted: false };
    const written = await deps.agentClient.streamCompletion(t, { messages: summaryRequest(summary, plan.summarise), model }, () => {});
    const next = written.trim().slice(0, LIMITS.sessionSummaryMaxChars) || summary || '';
    const sinceSeq = plan.summarise.at(-1)!.seq;
    await db.withUser(userId, (trx) => sessionsRepo.compacted(trx, { agentId, userId, key, summary: next, sinceSeq }));
    return { summary: next, turns: plan.keep, compacted: true };
  }

  return {
    /**
     * One message in the session `key` of the owner's agent: a reset word starts the session over;
     * anything else goes to the agent with the session's history (compacted first when full), and
     * the turn is stored in the session. Refusals of the agent or its model throw as chat's do.
     */
    async converse(userId: string, agentId: string, input: ConverseInput): Promise<ConverseResult> {
      const t = input.target ?? (await deps.open(userId, agentId));
      const base = { agentId: t.agent.id, agentName: t.agent.name };
      if (isResetWord(input.text, resetTriggers(t.agent.config))) {
        await serially(`${t.agent.id}\n${input.key}`, () => reset(userId, t.agent.id, input.key));
        input.onDelta?.(RESET_REPLY);
        return { ...base, reply: RESET_REPLY, responseMs: 0, reset: true, compacted: false };
      }
      return serially(`${t.agent.id}\n${input.key}`, async () => {
        const askedAt = new Date();
        const { summary, turns, compacted } = await compactIfFull(userId, t, input.key, input.text, input.model);
        const messages = sessionMessages(summary, turns, input.text);
        const reply = await deps.agentClient.streamCompletion(
          t,
          { messages, model: input.model },
          input.onDelta ?? (() => {}),
          input.signal,
        );
        const responseMs = Date.now() - askedAt.getTime();
        await deps.messages.recordTurn(userId, {
          agentId: t.agent.id,
          question: input.text.slice(0, STORED_ANSWER_MAX_CHARS),
          askedAt,
          answer: reply.slice(0, STORED_ANSWER_MAX_CHARS),
          responseMs,
          platform: input.source,
          sessionKey: input.key,
        });
        return { ...base, reply, responseMs, reset: false, compacted };
      });
    },

    /** Starts the session `key` over (a reset word, or the dashboard's New conversation). */
    async reset(userId: string, agentId: string, key: string): Promise<void> {
      // a stopped agent's session can be started over too; another user's agent is not found (§4.7: 404)
      if (!(await db.withUser(userId, (trx) => sessionsRepo.agentExists(trx, agentId)))) throw notFound('Agent not found');
      await serially(`${agentId}\n${key}`, () => reset(userId, agentId, key));
    },
  };
}

export type Sessions = ReturnType<typeof createSessions>;
