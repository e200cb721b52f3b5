/**
 * A local OpenAI-compatible upstream (the router and the openai/groq/gemini-type providers) over
 * real HTTP: `POST /v1/chat/completions` (JSON or SSE) and `GET /v1/models`. It records what it
 * received, fails on demand per model, and notices requests the client aborted.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ReceivedRequest = { method: string; path: string; headers: IncomingMessage['headers']; body: any };

export type FakeOpenAi = {
  /** base URL including `/v1` (what ROUTER_BASE_URL etc. take) */
  url: string;
  requests: ReceivedRequest[];
  /** models answered with 500 */
  failModels: Set<string>;
  /** fixed delay before answering, ms */
  delayMs: number;
  /** streamed answers send one delta and then hold the response open until the client goes away */
  holdStreams: boolean;
  /** requests whose connection closed before the response was complete */
  aborted: number;
  waitForAbort(timeoutMs?: number): Promise<void>;
  models: { id: string; name?: string; pricing?: { prompt: string; completion: string }; context_length?: number }[];
  reset(): void;
  close(): Promise<void>;
};

const USAGE = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };

export async function startFakeOpenAi(options: { apiKey?: string; quiet?: boolean } = {}): Promise<FakeOpenAi> {
  const abortWaiters: (() => void)[] = [];
  const fake: FakeOpenAi = {
    url: '',
    requests: [],
    failModels: new Set(),
    delayMs: 0,
    holdStreams: false,
    aborted: 0,
    models: [],
    waitForAbort(timeoutMs = 5_000) {
      if (fake.aborted > 0) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('upstream saw no aborted request')), timeoutMs);
        abortWaiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    },
    reset() {
      fake.requests = [];
      fake.failModels.clear();
      fake.delayMs = 0;
      fake.holdStreams = false;
      fake.aborted = 0;
    },
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };

  const json = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    for await (const c of req) raw += c;
    let body: any = undefined;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      return json(res, 400, { error: { message: 'bad json' } });
    }
    const path = (req.url ?? '').split('?')[0]!;
    if (!options.quiet) fake.requests.push({ method: req.method ?? '', path, headers: req.headers, body });
    res.on('close', () => {
      if (!res.writableFinished) {
        fake.aborted++;
        for (const w of abortWaiters.splice(0)) w();
      }
    });
    if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) return json(res, 401, { error: { message: 'bad key' } });
    if (req.method === 'GET' && path === '/v1/models') return json(res, 200, { data: fake.models });
    if (req.method !== 'POST' || path !== '/v1/chat/completions') return json(res, 404, { error: { message: 'not found' } });
    if (fake.delayMs > 0) await new Promise((r) => setTimeout(r, fake.delayMs));
    const model = String(body?.model ?? '');
    if (fake.failModels.has(model)) return json(res, 500, { error: { message: `model ${model} failed` } });
    const last = [...(body?.messages ?? [])].reverse().find((m: any) => m.role === 'user');
    const content = `Echo: ${last?.content ?? ''}`;
    if (!body?.stream) {
      return json(res, 200, {
        id: 'chatcmpl-fake',
        object: 'chat.completion',
        model,
        choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
        usage: USAGE,
      });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      res.write(`data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta }], ...extra })}\n\n`);
    chunk({ role: 'assistant', content: '' });
    const parts = content.match(/.{1,4}/gs) ?? [''];
    if (fake.holdStreams) {
      chunk({ content: parts[0] });
      return; // never finishes: only the client going away ends it
    }
    for (const p of parts) {
      chunk({ content: p });
      await new Promise((r) => setImmediate(r));
    }
    res.write(`data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', model, choices: [], usage: USAGE })}\n\n`);
    res.end('data: [DONE]\n\n');
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}
