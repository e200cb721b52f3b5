/**
 * The HTTP layer every provider adapter shares: one undici keep-alive `Pool` per upstream origin
 * (connections are reused across requests, no TLS or TCP handshake per call), a base path taken
 * from the configured base URL, and SSE parsing for streamed responses.
 */
import type { Pool } from 'undici';
import type { CallSignal } from '../../../lib/cancellation.ts';
import { undici, undiciIfLoaded } from '../../../lib/undici.ts';
import { ProviderError } from './provider.contract.ts';

/** A whole upstream answer in memory: what a non-streamed call needs (the body is parsed once, whole). */
export type BufferedResponse = { statusCode: number; body: Buffer };

export type UpstreamResponse = {
  statusCode: number;
  body: AsyncIterable<Buffer> & { text(): Promise<string>; json(): Promise<unknown>; dump?(): Promise<void> };
};

export type UpstreamClient = {
  send(
    method: 'GET' | 'POST',
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
    signal?: CallSignal,
  ): Promise<UpstreamResponse>;
  /**
   * `send` for an answer read whole (non-streamed calls): the body is collected as it arrives
   * instead of through a response stream. Rejects with a ProviderError as `send` does, also when
   * the connection fails while the body is read. `signal`: the call's own (an attempt's), as its
   * abort listener is left to go with it.
   */
  sendBuffered(
    method: 'GET' | 'POST',
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
    signal?: CallSignal,
  ): Promise<BufferedResponse>;
  close(): Promise<void>;
};

export type UpstreamOptions = {
  /** AI_TIMEOUT_MS: bounds time to response headers and each gap between body chunks */
  timeoutMs: number;
  /** keep-alive connections per origin (default 256) */
  connections?: number;
};

export function createUpstreamClient(baseUrl: string, options: UpstreamOptions): UpstreamClient {
  const url = new URL(baseUrl);
  const basePath = url.pathname.replace(/\/+$/, '');
  // made on the first call, when undici is loaded (src/lib/undici.ts): a provider configured but not called costs nothing
  let pool: Pool | undefined;
  const make = (u: typeof import('undici')) =>
    (pool ??= new u.Pool(url.origin, {
      connections: options.connections ?? 256,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    }));
  const poolNow = (): Pool | undefined => pool ?? (undiciIfLoaded() ? make(undiciIfLoaded()!) : undefined);
  const poolLater = (): Promise<Pool> => undici().then(make);
  return {
    async send(method, path, headers, body, signal) {
      try {
        const pool = poolNow() ?? (await poolLater());
        // undici takes any object with aborted, reason and add/removeEventListener (a CallSignal); its types name AbortSignal
        const res = await pool.request({ method, path: basePath + path, headers, body, signal: signal as AbortSignal | undefined });
        return res as unknown as UpstreamResponse;
      } catch (err) {
        throw asProviderError(err, signal);
      }
    },
    sendBuffered(method, path, headers, body, signal) {
      return new Promise<BufferedResponse>((resolve, reject) => {
        if (signal?.aborted) return reject(asProviderError(signal.reason, signal));
        const dispatch = (p: Pool) =>
          p.dispatch({ method, path: basePath + path, headers, body }, new BufferingHandler(resolve, reject, signal));
        const now = poolNow();
        if (now) dispatch(now);
        else poolLater().then(dispatch, reject);
      });
    },
    close: async () => {
      await pool?.close();
    },
  };
}

/**
 * An undici dispatch handler (its callback interface) that collects the answer's bytes. On the AI
 * proxy's hot path it replaces `pool.request` + `body.json()`, which built a response stream, a
 * headers object, an async resource and a promise chain per call only to read the whole body
 * (docs/benchmarks.md "AI proxy"). Backpressure is not needed: the whole body is wanted in memory,
 * as `body.json()` kept it.
 */
class BufferingHandler {
  private chunks: Buffer[] = [];
  private length = 0;
  private statusCode = 0;
  private abort: ((err: Error) => void) | undefined;
  private done = false;
  private readonly resolve: (r: BufferedResponse) => void;
  private readonly reject: (err: ProviderError) => void;
  private readonly signal: CallSignal | undefined;

  constructor(resolve: (r: BufferedResponse) => void, reject: (err: ProviderError) => void, signal: CallSignal | undefined) {
    this.resolve = resolve;
    this.reject = reject;
    this.signal = signal;
    if (signal) {
      // Not removed when the call ends (removing an EventTarget listener cost ~1 µs per call in
      // the proxy's profile): the signal is the call's own (model-routing.service.ts makes one per
      // attempt) and goes with it; `done` makes a late abort a no-op.
      signal.addEventListener('abort', () => {
        if (!this.done) this.abort?.(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      });
    }
  }

  onConnect(abort: (err: Error) => void): void {
    this.abort = abort;
    if (this.signal?.aborted) abort(this.signal.reason instanceof Error ? this.signal.reason : new Error('aborted'));
  }

  onHeaders(statusCode: number): boolean {
    if (statusCode >= 200) this.statusCode = statusCode; // 1xx: informational, the real answer follows
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    this.length += chunk.length;
    return true;
  }

  onComplete(): void {
    this.done = true;
    const { chunks } = this;
    this.resolve({ statusCode: this.statusCode, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.length) });
  }

  onError(err: Error): void {
    this.done = true;
    this.reject(asProviderError(err, this.signal));
  }
}

/** Any thrown value as a ProviderError, marking aborts (client gone or attempt timeout). */
export function asProviderError(err: unknown, signal?: CallSignal): ProviderError {
  if (err instanceof ProviderError) return err;
  const e = err as { name?: string; code?: string; message?: string };
  const aborted = signal?.aborted === true || e?.name === 'AbortError' || e?.code === 'UND_ERR_ABORTED';
  const timeout = e?.code === 'UND_ERR_HEADERS_TIMEOUT' || e?.code === 'UND_ERR_BODY_TIMEOUT';
  return new ProviderError(
    aborted ? 'upstream request aborted' : timeout ? 'upstream timed out' : `upstream unreachable: ${e?.message ?? 'error'}`,
    {
      aborted,
      cause: err,
    },
  );
}

/** A buffered 2xx body as JSON; a body that is not JSON is a ProviderError. */
export function parseJsonBody(body: Buffer, provider: string): Record<string, any> {
  try {
    return JSON.parse(body.toString('utf8')) as Record<string, any>;
  } catch (err) {
    throw new ProviderError(`${provider} sent a body that is not JSON`, { cause: err });
  }
}

/**
 * Reads a non-2xx body (bounded) and throws it as a ProviderError carrying the status and, for the
 * request's own faults (REQUEST_FAULTS: a bad tool schema, a context too long), the upstream's
 * message, which the agent gateway passes on. Never for 401/403: those are about our key.
 */
export async function failFromStatus(res: UpstreamResponse, provider: string): Promise<never> {
  let text = '';
  try {
    text = (await res.body.text()).slice(0, 4000);
  } catch {
    // the status alone is enough
  }
  return failWith(res.statusCode, text, provider);
}

/** failFromStatus for an answer already read whole (BufferedResponse). */
export function failFromBuffered(res: BufferedResponse, provider: string): never {
  return failWith(res.statusCode, res.body.toString('utf8', 0, Math.min(res.body.length, 16_000)).slice(0, 4000), provider);
}

function failWith(statusCode: number, text: string, provider: string): never {
  const detail = text.slice(0, 300);
  let upstreamMessage: string | undefined;
  if (REQUEST_FAULTS.has(statusCode)) {
    try {
      const m = (JSON.parse(text) as { error?: { message?: unknown } | string })?.error;
      const msg = typeof m === 'string' ? m : m?.message;
      if (typeof msg === 'string' && msg) upstreamMessage = msg.slice(0, 1000);
    } catch {
      // not JSON: no message to pass on
    }
  }
  throw new ProviderError(`${provider} answered ${statusCode}${detail ? `: ${detail}` : ''}`, {
    status: statusCode,
    ...(upstreamMessage ? { upstreamMessage } : {}),
  });
}

/**
 * Upstream statuses that mean "this request is wrong" rather than "this provider failed": another
 * attempt (the fallback model) would fail the same way. A 404 is not one: the model may be gone
 * upstream, and the fallback serves (§4.9).
 */
export const REQUEST_FAULTS: ReadonlySet<number> = new Set([400, 413, 422]);

export type SseMessage = { event: string | undefined; data: string };

/** Parses a `text/event-stream` body into messages (`event:` and joined `data:` lines). */
export async function* parseSse(body: AsyncIterable<Buffer>, signal?: CallSignal): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event: string | undefined;
  let data: string[] = [];
  try {
    for await (const chunk of body) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf('\n')) !== -1) {
        let line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (data.length > 0) yield { event, data: data.join('\n') };
          event = undefined;
          data = [];
        } else if (line.startsWith('data:')) {
          data.push(line.slice(line.charAt(5) === ' ' ? 6 : 5));
        } else if (line.startsWith('event:')) {
          event = line.slice(6).trim();
        }
      }
    }
  } catch (err) {
    throw asProviderError(err, signal);
  }
  if (data.length > 0) yield { event, data: data.join('\n') };
}
