/**
 * The one way the dashboard talks to the platform: openapi-fetch over the generated `paths`
 * (openapi.gen.ts, from the web app's OpenAPI description), same origin, the HttpOnly session
 * cookie sent by the browser (the page never sees it). Every failure becomes an ApiError whose
 * message is words a person can read, never a raw JSON body.
 */
import createClient from 'openapi-fetch';
import type { paths } from './openapi.gen.ts';

export const api = createClient<paths>({ baseUrl: '', credentials: 'same-origin' });

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
    readonly body?: Record<string, unknown>,
  ) {
    super(message);
  }
}

const FALLBACK: Record<number, string> = {
  400: 'The request was not accepted.',
  401: 'Your session has ended. Please sign in again.',
  402: 'This needs an active plan or payment.',
  403: 'You are not allowed to do that.',
  404: 'Not found.',
  409: 'That already exists.',
  413: 'That is too large.',
  429: 'Too many attempts. Please wait a moment and try again.',
  500: 'The server had a problem. Please try again.',
  502: 'A service the platform depends on did not answer. Please try again.',
  503: 'This is not available on this server right now.',
};

/** Turns an openapi-fetch result into its data, or throws an ApiError with a readable message. */
export async function call<T>(p: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await p;
  } catch {
    throw new ApiError(0, 'Cannot reach the server. Check your connection and try again.');
  }
  const { data, error, response } = result;
  if (response.ok) return data as T;
  const body = (error && typeof error === 'object' ? error : {}) as { error?: unknown; code?: unknown };
  const code = typeof body.code === 'string' ? body.code : undefined;
  const text = (typeof body.error === 'string' && body.error) || FALLBACK[response.status] || `Request failed (${response.status}).`;
  if (response.status === 401) window.dispatchEvent(new CustomEvent('session-ended'));
  throw new ApiError(response.status, text, code, body as Record<string, unknown>);
}

export const messageOf = (err: unknown) => (err instanceof Error ? err.message : 'Something went wrong.');

/**
 * Reads a text/event-stream response (POST streams cannot use EventSource): calls `onEvent` for
 * every `event:`/`data:` block until the stream ends or `signal` aborts.
 */
export async function readEvents(response: Response, onEvent: (name: string, data: unknown) => void): Promise<void> {
  if (!response.body) return;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf('\n\n')) !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) name = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
      }
      if (data.length === 0) continue;
      let parsed: unknown = data.join('\n');
      try {
        parsed = JSON.parse(parsed as string);
      } catch {
        /* plain text data */
      }
      onEvent(name, parsed);
    }
  }
}
