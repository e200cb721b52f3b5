/**
 * Storing what the gateway proxy passes through (docs/agents.md "Who stores turns"): a streamed
 * chat completion is not reported by the runtime (it passes the bytes through without reading
 * them), so the platform reads the question from the request and the answer from the stream as
 * it flows to the caller, and stores the turn once the stream has ended.
 */
import { pipeline, type Readable, Transform } from 'node:stream';
import { createCompletionText } from './completion-text.rules.ts';

/** How much of a question or an answer the history keeps (the caller still gets all of it; chat cuts its turns the same). */
export const STORED_ANSWER_MAX_CHARS = 200_000;

type Part = { type?: unknown; text?: unknown };

/**
 * The question of an OpenAI chat completions request that asks for a stream: the text of its last
 * user message (text parts of a multi-part message joined by new lines). Undefined for anything
 * else (not JSON, not streamed, no user text): such a request is passed through and not stored here.
 */
export function streamedQuestion(body: Buffer | undefined): string | undefined {
  if (!body || body.length === 0) return undefined;
  let request: { stream?: unknown; messages?: unknown };
  try {
    request = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (request?.stream !== true || !Array.isArray(request.messages)) return undefined;
  const last = (request.messages as { role?: unknown; content?: unknown }[]).findLast((m) => m?.role === 'user');
  const content = last?.content;
  const text =
    typeof content === 'string'
      ? content
      : Array.isArray(content)
        ? (content as Part[])
            .filter((p) => p?.type === 'text' && typeof p.text === 'string')
            .map((p) => p.text as string)
            .join('\n')
        : '';
  return text.trim() ? text : undefined;
}

/**
 * `source` unchanged, chunk by chunk as it arrives (nothing is held back from the caller), while
 * the answer's text is read on the side; `onAnswer` gets it when the stream ends normally with a
 * non-empty answer and no error event. A stream cut short (the caller left, the agent failed, the
 * credential was revoked) stores nothing.
 */
export function readingAnswer(source: Readable, onAnswer: (answer: string) => void): Readable {
  const reader = createCompletionText(STORED_ANSWER_MAX_CHARS);
  const tee = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      reader.push(chunk);
      done(null, chunk);
    },
    flush(done) {
      reader.end();
      if (!reader.error && reader.text) onAnswer(reader.text);
      done();
    },
  });
  // destroying either end (the proxy does when the caller leaves) destroys the other
  pipeline(source, tee, () => {});
  return tee;
}
