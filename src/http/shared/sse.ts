/**
 * Server-Sent Events: every stream of ours (AI chat, REST chat, plugin calls through the gateway,
 * live logs) starts the same way. The reply is hijacked (Fastify no longer writes it, so its
 * hooks do not add headers: the request id is set here), and proxies are told neither to buffer
 * (`x-accel-buffering`) nor to transform it.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type CallSignal, Cancellation } from '../../lib/cancellation.ts';

export function startEventStream(
  request: FastifyRequest,
  reply: FastifyReply,
  headers: Record<string, string | number | string[]> = {},
): ServerResponse {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    'x-request-id': request.id,
  });
  return res;
}

/**
 * Aborts when the client goes away before the response has been fully written (every proxied AI
 * answer, streamed or not). A Cancellation, not an AbortController: this runs on every AI request
 * (../../lib/cancellation.ts says what that saves).
 */
export function disconnectSignal(reply: FastifyReply): CallSignal {
  const cancellation = new Cancellation();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) cancellation.abort(new Error('client disconnected'));
  });
  return cancellation;
}

/**
 * Writes to an event stream, waiting for the socket to drain before the next write, so a slow
 * client slows the upstream read instead of filling memory (every streamed answer).
 */
export function sseWriter(res: ServerResponse): (chunk: string) => Promise<void> {
  return async (chunk) => {
    if (res.destroyed) return;
    if (!res.write(chunk))
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
  };
}

/** How an event stream is written: each event's frame, an optional last frame, and what a failure leaves. */
export type EventStreamFrames<T> = {
  /** the text of one event (`data: …\n\n`) */
  frame: (event: T) => string;
  /** written after the last event, when the events ended normally */
  last?: string;
  /** a failure of the events after the stream started: the log line, and the frame that tells the client */
  failure: { log: string; frame: string };
  /** response headers besides the event stream's own */
  headers?: Record<string, string>;
};

/**
 * Writes `events` as an event stream (the streamed AI chat, the model gateway's completions, the
 * v1 gateway's plugin answers): each frame waits for the socket to drain (sseWriter), reading stops
 * when the client has gone, and the response ends whatever happens.
 */
export async function writeEventStream<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  events: AsyncIterable<T>,
  frames: EventStreamFrames<T>,
): Promise<void> {
  const res = startEventStream(request, reply, frames.headers);
  const write = sseWriter(res);
  try {
    for await (const event of events) {
      if (res.destroyed) break;
      await write(frames.frame(event));
    }
    if (frames.last !== undefined) await write(frames.last);
  } catch (err) {
    if (!res.destroyed) {
      request.log.warn({ err: (err as Error).message }, frames.failure.log);
      await write(frames.failure.frame);
    }
  } finally {
    if (!res.destroyed) res.end();
  }
}
