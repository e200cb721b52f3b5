/**
 * A local OpenAI-compatible model provider: `POST /v1/chat/completions` answers a fixed
 * completion (`reply`, or "echo: <last user message>" by default), as JSON or, with
 * `stream:true`, as server-sent events ending in `data: [DONE]`. Records every request.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export type UpstreamRequest = {
  authorization?: string;
  body: { model?: string; messages?: { role: string; content: string | { type: string; text?: string }[] }[]; stream?: boolean };
};

export type FakeOpenAiUpstream = {
  /** base URL including /v1 (what AGENT_MODEL_BASE_URL takes) */
  baseUrl: string;
  requests: UpstreamRequest[];
  /** fixed reply; unset: echo the last user message */
  reply?: string;
  /** answer every request with this status and an OpenAI error body */
  failWith?: number;
  close(): Promise<void>;
};

const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });

export async function startFakeOpenAiUpstream(options: { apiKey?: string; reply?: string } = {}): Promise<FakeOpenAiUpstream> {
  const state: FakeOpenAiUpstream = { baseUrl: '', requests: [], reply: options.reply, close: async () => {} };
  const server = createServer(async (req, res) => {
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found' } }));
      return;
    }
    const body = JSON.parse((await readBody(req)) || '{}') as UpstreamRequest['body'];
    state.requests.push({ authorization: req.headers.authorization, body });
    if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'invalid api key', type: 'invalid_request_error' } }));
      return;
    }
    if (state.failWith) {
      res.writeHead(state.failWith, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'upstream failure', type: 'server_error' } }));
      return;
    }
    const lastUser = [...(body.messages ?? [])].reverse().find((m) => m.role === 'user');
    // content is a string or, as OpenAI also accepts (OpenClaw sends it so), an array of parts
    const text = (c: unknown): string =>
      Array.isArray(c) ? c.map((p: { type?: string; text?: string }) => (p?.type === 'text' ? (p.text ?? '') : '')).join('') : String(c ?? '');
    const content = state.reply ?? `echo: ${text(lastUser?.content)}`;
    const id = `chatcmpl-${state.requests.length}`;
    const created = Math.floor(Date.now() / 1000);
    const model = body.model ?? 'fake-model';
    if (body.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const words = content.split(/(?<= )/);
      for (const w of words) {
        res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta: { content: w }, finish_reason: null }] })}\n\n`);
      }
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  state.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return state;
}
