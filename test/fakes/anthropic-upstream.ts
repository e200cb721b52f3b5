/**
 * A local Anthropic Messages API (`POST /v1/messages`, JSON or SSE) over real HTTP. Rejects a
 * wrong `x-api-key` or a missing `anthropic-version` the way the real API does.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ReceivedRequest } from './openai-upstream.ts';

export type FakeAnthropic = {
  url: string;
  requests: ReceivedRequest[];
  failModels: Set<string>;
  reset(): void;
  close(): Promise<void>;
};

export async function startFakeAnthropic(options: { apiKey: string }): Promise<FakeAnthropic> {
  const fake: FakeAnthropic = {
    url: '',
    requests: [],
    failModels: new Set(),
    reset() {
      fake.requests = [];
      fake.failModels.clear();
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    for await (const c of req) raw += c;
    const body = raw ? JSON.parse(raw) : undefined;
    const path = (req.url ?? '').split('?')[0]!;
    fake.requests.push({
      method: req.method ?? '',
      path,
      headers: req.headers,
      authorization: req.headers.authorization,
      body: body ?? {},
    });
    if (req.headers['x-api-key'] !== options.apiKey)
      return json(res, 401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
    if (!req.headers['anthropic-version'])
      return json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'anthropic-version required' } });
    if (req.method !== 'POST' || path !== '/v1/messages') return json(res, 404, { type: 'error', error: { type: 'not_found_error' } });
    if (typeof body?.max_tokens !== 'number')
      return json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens required' } });
    if ((body.messages ?? []).some((m: any) => m.role === 'system'))
      return json(res, 400, { type: 'error', error: { message: 'system role not allowed in messages' } });
    const model = String(body.model);
    if (fake.failModels.has(model)) return json(res, 529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    const last = [...body.messages].reverse().find((m: any) => m.role === 'user');
    const text = `Claude: ${last?.content ?? ''}`;
    if (!body.stream) {
      return json(res, 200, {
        id: 'msg_fake',
        type: 'message',
        role: 'assistant',
        model,
        content: [{ type: 'text', text }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 20, output_tokens: 7 },
      });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const ev = (type: string, data: Record<string, unknown>) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    ev('message_start', { message: { id: 'msg_fake', model, usage: { input_tokens: 20, output_tokens: 1 } } });
    ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
    for (const p of text.match(/.{1,5}/gs) ?? []) ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: p } });
    ev('content_block_stop', { index: 0 });
    ev('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 7 } });
    ev('message_stop', {});
    res.end();
  };
  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
