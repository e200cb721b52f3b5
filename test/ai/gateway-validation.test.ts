/**
 * The hand-written check in front of the AI gateway's zod body schema
 * (src/domains/ai/model-gateway.schemas.ts): whatever it accepts, zod accepts with the
 * same output (same JSON, same key order), so every rejection and every unusual body stays zod's.
 * Checked on a valid body and on many mutations of it.
 */

import { describe, expect, it } from 'vitest';
import { safeEncode, safeParse } from 'zod/v4/core';
import { completion, completionBody, fastCompletionBody, fastCompletionJson } from '../../src/domains/ai/model-gateway.schemas.ts';
import { chatBodyMutations, validChatBody } from './body-mutations.ts';

const FIELDS = Object.keys(completionBody.shape);

const valid = validChatBody;

function* bodies(): Generator<unknown> {
  yield* chatBodyMutations(
    [...FIELDS, 'extra', 'models', 'provider'],
    [
      { role: 'user', content: [{ type: 'text', text: 'x' }] },
      { role: 'assistant', name: 'bob', content: 'x' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'result' },
      { role: 'developer', content: '' },
    ],
  );
  yield { max_tokens: 3, user: 'u', messages: [{ role: 'user', content: 'x' }], stream: null, top_p: 1, model: ' auto ' };
}

describe("the fast check of the AI gateway's body", () => {
  it('accepts only what zod accepts, with the output zod gives', () => {
    let accepted = 0;
    let total = 0;
    for (const body of bodies()) {
      total++;
      const fast = fastCompletionBody(FIELDS, body);
      if (fast === undefined) continue; // zod decides, as the route does
      const zod = safeParse(completionBody, body);
      accepted++;
      expect(zod.success, JSON.stringify(body)?.slice(0, 200)).toBe(true);
      expect(JSON.stringify(fast)).toBe(JSON.stringify(zod.data));
    }
    // the check really takes the common bodies (most mutations are of fields it leaves to zod)
    expect(accepted).toBeGreaterThan(total / 6);
  });

  it('takes a realistic body without zod, dropping what the schema does not list', () => {
    const body = { ...valid(), model: ' openai/gpt-4o-mini ', models: ['x'], provider: { order: ['y'] } };
    expect(fastCompletionBody(FIELDS, body)).toEqual({
      model: 'openai/gpt-4o-mini',
      messages: body.messages,
      temperature: 0.2,
      max_tokens: 256,
    });
  });

  it('leaves tools, content parts and other listed fields to zod', () => {
    expect(fastCompletionBody(FIELDS, { ...valid(), tools: [{ type: 'function' }] })).toBeUndefined();
    expect(
      fastCompletionBody(FIELDS, { ...valid(), messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }] }),
    ).toBeUndefined();
    expect(fastCompletionBody(FIELDS, { ...valid(), stream_options: { include_usage: true } })).toBeUndefined();
  });
});

describe("the AI gateway's answer written without zod", () => {
  const answer = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'openai/gpt-4o-mini',
    provider: 'router',
    choices,
    usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
    ...extra,
  });
  const choices: unknown[][] = [
    [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
    // OpenAI's own order: logprobs before finish_reason, refusal after content
    [{ index: 0, message: { role: 'assistant', content: 'hi', refusal: null }, logprobs: null, finish_reason: 'stop' }],
    [{ finish_reason: 'tool_calls', message: { tool_calls: [{ id: 'c', type: 'function' }], content: null, role: 'assistant' }, index: 0 }],
    [{ index: 0, finish_reason: null }],
    [
      { index: 0, message: { role: 'assistant', content: 'a' }, finish_reason: 'stop' },
      { index: 1, message: { content: 'b' } },
    ],
    [],
    // what the schema refuses: zod decides (a 500)
    [{ index: '0', message: { role: 'assistant', content: 'hi' } }],
    [{ index: 0, message: { role: 'assistant', content: 5 } }],
    [{ index: 0, message: 'hi' }],
    [{ index: 0, finish_reason: 3 }],
    ['choice'],
    [null],
  ];
  const cases = [
    ...choices.map((c) => answer(c)),
    answer(choices[0]!, { system_fingerprint: 'fp_1' }),
    answer(choices[0]!, { system_fingerprint: 5 }),
    answer(choices[0]!, { created: Number.NaN }),
    answer(choices[0]!, { usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3, cost: 9 } }),
    answer(choices[0]!, { usage: { prompt_tokens: 1 } }),
    answer(choices[0]!, { object: 'chat.completion.chunk' }),
    answer(choices[0]!, { unlisted: 'never leaves' }),
  ];

  it('writes the JSON value the zod serializer writes, and leaves to zod what it refuses', () => {
    let written = 0;
    for (const r of cases) {
      const fast = fastCompletionJson(r as never);
      const zod = safeEncode(completion, r as never);
      if (fast === undefined) {
        // only what zod refuses is left to it here; the valid answers above must all be written
        if (zod.success) throw new Error(`left to zod though it passes: ${JSON.stringify(r).slice(0, 200)}`);
        continue;
      }
      written++;
      expect(zod.success, JSON.stringify(r).slice(0, 200)).toBe(true);
      // the same value; a choice's keys stay in the provider's order (zod's puts the schema's first)
      expect(JSON.parse(fast)).toEqual(zod.data);
      expect(Object.keys(JSON.parse(fast))).toEqual(Object.keys(zod.data as object));
      expect(JSON.parse(fast).choices).toEqual((r as { choices: unknown }).choices);
    }
    expect(written).toBe(9);
  });
});
