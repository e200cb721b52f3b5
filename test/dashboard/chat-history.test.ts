/**
 * What the dashboard's chat sends to the model (dashboard/src/chat-history.ts): the conversation
 * in the order said, starting with a question, roles alternating, the last 20 messages.
 */
import { describe, expect, it } from 'vitest';
import { type ChatLine, modelMessages } from '../../dashboard/src/chat-history.ts';

const line = (sender: 'user' | 'agent', content: string, failed?: boolean): ChatLine => ({
  id: `${sender}-${content}`,
  sender,
  content,
  ...(failed ? { failed } : {}),
});

describe('modelMessages', () => {
  it('keeps the order and maps senders to roles', () => {
    expect(modelMessages([line('user', 'q1'), line('agent', 'a1'), line('user', 'q2')])).toEqual([
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: 'a1' },
      { role: 'user', content: 'q2' },
    ]);
  });

  it('a question whose answer failed is joined to the next question; empty lines are left out', () => {
    expect(modelMessages([line('user', 'q1'), line('agent', 'partial', true), line('agent', ''), line('user', 'q2')])).toEqual([
      { role: 'user', content: 'q1\n\nq2' },
    ]);
  });

  it('the last 20 messages, never starting with an answer', () => {
    const lines: ChatLine[] = [];
    for (let i = 0; i < 15; i++) lines.push(line('user', `q${i}`), line('agent', `a${i}`));
    lines.push(line('user', 'now'));
    const sent = modelMessages(lines);
    expect(sent[0]).toEqual({ role: 'user', content: 'q6' });
    expect(sent.at(-1)).toEqual({ role: 'user', content: 'now' });
    expect(sent.length).toBe(19);
    expect(sent.every((m, i) => m.role === (i % 2 ? 'assistant' : 'user'))).toBe(true);
  });
});
