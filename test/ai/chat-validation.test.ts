/**
 * The hand-written check in front of POST /api/ai/chat's zod schema (src/domains/ai/ai-chat.schemas.ts):
 * whatever it accepts, zod accepts with the same output, so every rejection stays zod's. Checked on
 * a valid body and on many mutations of it (each field made wrong, missing, odd, at its bounds).
 */

import { describe, expect, it } from 'vitest';
import { safeParse } from 'zod/v4/core';
import { chatBody, fastChatBody } from '../../src/domains/ai/ai-chat.schemas.ts';
import { chatBodyMutations, validChatBody } from './body-mutations.ts';

const valid = validChatBody;

const FIELDS = ['model', 'taskType', 'temperature', 'top_p', 'max_tokens', 'algorithmMode', 'stream', 'agentId', 'extra'];

function* bodies(): Generator<unknown> {
  yield* chatBodyMutations(FIELDS);
  yield { ...valid(), agentId: '  agent-1 ', taskType: 'coding', top_p: 1, stream: true, algorithmMode: false };
}

describe('the fast check of the chat body', () => {
  it('accepts only what zod accepts, with the output zod gives', () => {
    let accepted = 0;
    let total = 0;
    for (const body of bodies()) {
      total++;
      const fast = fastChatBody(body);
      const zod = safeParse(chatBody, body);
      if (fast === undefined) continue; // zod decides, as the route does
      accepted++;
      expect(zod.success, JSON.stringify(body)?.slice(0, 200)).toBe(true);
      expect(fast).toEqual(zod.data);
      // same keys in the same order, so the upstream body is the same bytes
      expect(JSON.stringify(fast)).toBe(JSON.stringify(zod.data));
    }
    // the check really takes the common bodies (not a pass-through to zod for everything; most
    // mutations are values zod refuses)
    expect(accepted).toBeGreaterThan(total / 5);
  });

  it('takes a realistic body without zod', () => {
    const body = { ...valid(), model: '  openai/gpt-4o-mini ', unknown: 1 };
    expect(fastChatBody(body)).toEqual({ model: 'openai/gpt-4o-mini', messages: body.messages, temperature: 0.2, max_tokens: 256 });
  });

  it('leaves a message with another field, or with its fields in another order, to zod', () => {
    expect(fastChatBody({ messages: [{ role: 'user', content: 'x', name: 'bob' }] })).toBeUndefined();
    expect(fastChatBody({ messages: [{ content: 'x', role: 'user' }] })).toBeUndefined();
  });
});
