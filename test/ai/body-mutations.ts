/**
 * Chat bodies for the tests that compare a hand-written body check with its zod schema
 * (chat-validation.test.ts, gateway-validation.test.ts): a valid body, and mutations of it (each
 * field made wrong, missing, odd, at its bounds; messages of every wrong shape).
 */
import { LIMITS } from '../../src/config/limits.ts';

export const validChatBody = () => ({
  model: 'openai/gpt-4o-mini',
  messages: [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'hello' },
  ],
  temperature: 0.2,
  max_tokens: 256,
});

/** Values each field is set to in turn. */
const ODD: unknown[] = [
  undefined,
  null,
  '',
  ' ',
  '  x  ',
  'x'.repeat(200),
  ` ${'x'.repeat(200)} `,
  'x'.repeat(201),
  'x'.repeat(257),
  0,
  -1,
  0.5,
  1,
  2,
  2.0001,
  2.5,
  1_000_000,
  1_000_001,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  true,
  false,
  [],
  {},
  ['a'],
  ['user'],
  { include_usage: true },
  { type: 'json_object' },
  'auto',
  'coding',
  'general',
  'nope',
];

/** Messages put alone, and after a valid one, into the valid body. */
const MESSAGES: unknown[] = [
  'x',
  null,
  [],
  {},
  { role: 'user' },
  { content: 'x' },
  { role: 'robot', content: 'x' },
  { role: 'user', content: 5 },
  { role: 'user', content: null },
  { content: 'x', role: 'user' },
  { role: 'user', content: 'x', name: 'bob' },
  { role: 'assistant', content: '' },
  { role: 'user', content: 'x'.repeat(LIMITS.aiMaxMessageChars) },
  { role: 'user', content: 'x'.repeat(LIMITS.aiMaxMessageChars + 1) },
];

/** The valid body, bodies of the wrong type, and each of `fields` and each message shape mutated (plus `messages`). */
export function* chatBodyMutations(fields: string[], messages: unknown[] = []): Generator<unknown> {
  const valid = validChatBody;
  yield valid();
  yield {};
  yield null;
  yield [];
  yield 'text';
  yield { messages: [] };
  yield { messages: [{ role: 'user', content: 'x' }] };
  for (const field of fields) for (const v of ODD) yield { ...valid(), [field]: v };
  for (const m of [...MESSAGES, ...messages]) {
    yield { ...valid(), messages: [m] };
    yield { ...valid(), messages: [{ role: 'user', content: 'a' }, m] };
  }
  yield { ...valid(), messages: Array.from({ length: LIMITS.aiMaxMessages }, () => ({ role: 'user', content: 'a' })) };
  yield { ...valid(), messages: Array.from({ length: LIMITS.aiMaxMessages + 1 }, () => ({ role: 'user', content: 'a' })) };
  yield { ...valid(), messages: 'hello' };
  yield { ...valid(), messages: { role: 'user', content: 'x' } };
}
