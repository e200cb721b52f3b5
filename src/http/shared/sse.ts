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
