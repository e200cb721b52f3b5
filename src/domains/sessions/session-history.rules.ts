/**
 * What the model is sent for a conversation session, and when it is compacted (§8 session tokens:
 * 100,000 per session, compaction automatic at 80%; docs/channels.md "Sessions"). Pure functions:
 * the sessions service reads the turns and calls the model.
 *
 * Tokens are estimated, not counted: `LIMITS.sessionCharsPerToken` (4) characters a token, the
 * usual figure for English text. The agent's model and its tokenizer are the agent's business; the
 * estimate only decides when to compact, and a compacted session stays far below any model's window.
 */
import { LIMITS } from '../../config/limits.ts';
import type { ChatMessage } from '../agents/index.ts';

/** One stored message of a session, oldest first. */
export type SessionTurn = { seq: number; role: 'user' | 'assistant'; content: string };

export const estimateTokens = (text: string): number => Math.ceil(text.length / LIMITS.sessionCharsPerToken);

const tokensOf = (turns: readonly SessionTurn[]) => turns.reduce((n, t) => n + estimateTokens(t.content), 0);

/** The session's size as the model would get it: its summary, its turns and the next message. */
export function sessionTokens(summary: string | null, turns: readonly SessionTurn[], next: string): number {
  return estimateTokens(summary ?? '') + tokensOf(turns) + estimateTokens(next);
}

/**
 * Whether the session must be compacted before `next` is sent, and how: at 80% of the §8 limit the
 * oldest turns are summarised and the newest kept verbatim, up to `LIMITS.sessionKeepRatio` of the
 * limit, starting at a question so the kept history reads as a conversation. Undefined when the
 * session is below the threshold (or nothing could be summarised).
 */
export function compactionPlan(
  summary: string | null,
  turns: readonly SessionTurn[],
  next: string,
): { summarise: SessionTurn[]; keep: SessionTurn[] } | undefined {
  if (sessionTokens(summary, turns, next) < LIMITS.sessionMaxTokens * LIMITS.sessionCompactAtRatio) return undefined;
  const budget = LIMITS.sessionMaxTokens * LIMITS.sessionKeepRatio - estimateTokens(next);
  let start = turns.length;
  let kept = 0;
  while (start > 0 && kept + estimateTokens(turns[start - 1]!.content) <= budget) {
    start--;
    kept += estimateTokens(turns[start]!.content);
  }
  while (start < turns.length && turns[start]!.role !== 'user') start++;
  if (start === 0) return undefined;
  return { summarise: turns.slice(0, start), keep: turns.slice(start) };
}

const SUMMARY_INSTRUCTIONS =
  'You are compacting a long conversation so that it can go on. Summarise it for your own memory: who the user is, ' +
  'facts, names, numbers, decisions, what was asked and answered, and what is still open, in the language of the conversation. ' +
  'Answer with the summary only.';

/** The request that asks the agent's model for a summary of `turns` (after an earlier summary, if any). */
export function summaryRequest(summary: string | null, turns: readonly SessionTurn[]): ChatMessage[] {
  return [
    { role: 'system', content: SUMMARY_INSTRUCTIONS },
    ...(summary ? [{ role: 'system' as const, content: `Summary of what came before:\n${summary}` }] : []),
    ...turns.map((t) => ({ role: t.role, content: t.content })),
    { role: 'user', content: 'Summarise the conversation above now, as instructed; answer with the summary only.' },
  ];
}

/** What the agent is sent for the session: the summary of compacted turns, the turns since, and the new message. */
export function sessionMessages(summary: string | null, turns: readonly SessionTurn[], next: string): ChatMessage[] {
  return [
    ...(summary
      ? [{ role: 'system' as const, content: `Summary of the earlier part of this conversation (older turns were compacted):\n${summary}` }]
      : []),
    ...turns.map((t) => ({ role: t.role, content: t.content })),
    { role: 'user', content: next },
  ];
}

/** The reset words of an agent: its configuration's `session.resetTriggers` (§2), else `/new` and `/reset`. */
export function resetTriggers(config: Record<string, unknown> | null | undefined): readonly string[] {
  const session = config?.session as { resetTriggers?: unknown } | undefined;
  const words = Array.isArray(session?.resetTriggers)
    ? session.resetTriggers.filter((w): w is string => typeof w === 'string' && w.trim() !== '').map((w) => w.trim().toLowerCase())
    : [];
  return words.length ? words : LIMITS.sessionResetTriggers;
}

/** Whether `text` is a reset word (case-insensitive; Telegram's `/new@BotName` form counts). */
export function isResetWord(text: string, triggers: readonly string[]): boolean {
  const word = text.trim().toLowerCase().replace(/@\w+$/, '');
  return triggers.includes(word);
}
