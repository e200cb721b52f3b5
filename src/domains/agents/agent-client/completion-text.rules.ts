/**
 * The text of a streamed OpenAI chat completion, read from its Server-Sent Events as the bytes
 * arrive (`data: {json}` events with `choices[0].delta.content`, ending with `data: [DONE]`).
 * Used where the platform reads a streamed answer: REST chat (through the gateway client) and
 * the gateway proxy (docs/agents.md "Who stores turns"). It only looks at the bytes; it never
 * holds them back.
 */

/** The longest event (the bytes between two blank lines) read; a stream that never ends one is not an answer. */
const MAX_EVENT_CHARS = 1024 * 1024;

/** `maxChars`: how much of the text `text` keeps (the pieces are all returned either way). */
export function createCompletionText(maxChars = Number.POSITIVE_INFINITY) {
  const decoder = new TextDecoder();
  let buffered = '';
  let text = '';
  let error: string | undefined;

  function event(block: string, pieces: string[]) {
    for (const line of block.split('\n')) {
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (!data || data === '[DONE]') continue;
      let chunk: { choices?: { delta?: { content?: unknown }; message?: { content?: unknown } }[]; error?: { message?: unknown } };
      try {
        chunk = JSON.parse(data);
      } catch {
        continue;
      }
      if (chunk?.error) {
        error ??= typeof chunk.error.message === 'string' ? chunk.error.message : 'stream error';
        continue;
      }
      const piece = chunk?.choices?.[0]?.delta?.content ?? chunk?.choices?.[0]?.message?.content;
      if (typeof piece !== 'string' || piece.length === 0) continue;
      pieces.push(piece);
      if (text.length < maxChars) text += text.length + piece.length > maxChars ? piece.slice(0, maxChars - text.length) : piece;
    }
  }

  function drain(pieces: string[]) {
    let end: number;
    while ((end = buffered.indexOf('\n\n')) !== -1) {
      event(buffered.slice(0, end), pieces);
      buffered = buffered.slice(end + 2);
    }
  }

  return {
    /** Reads more bytes; returns the pieces of text they completed (in order). */
    push(bytes: Uint8Array): string[] {
      const pieces: string[] = [];
      buffered += decoder.decode(bytes, { stream: true }).replace(/\r\n/g, '\n');
      drain(pieces);
      if (buffered.length > MAX_EVENT_CHARS) buffered = '';
      return pieces;
    },
    /** The stream ended: reads what is left. */
    end(): string[] {
      const pieces: string[] = [];
      buffered += decoder.decode();
      drain(pieces);
      if (buffered.trim()) event(buffered, pieces);
      buffered = '';
      return pieces;
    },
    /** The answer so far (at most `maxChars`). */
    get text() {
      return text;
    },
    /** The first error event's message, if the stream carried one. */
    get error() {
      return error;
    },
  };
}
