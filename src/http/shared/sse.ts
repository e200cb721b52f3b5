/**
 * Server-Sent Events: every stream of ours (AI chat, REST chat, plugin calls through the gateway,
 * live logs) starts the same way. The reply is hijacked (Fastify no longer writes it, so its
 * hooks do not add headers: the request id is set here), and proxies are told neither to buffer
 * (`x-accel-buffering`) nor to transform it.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';

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
