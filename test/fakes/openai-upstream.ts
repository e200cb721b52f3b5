/**
 * The one local OpenAI-compatible model provider of the tests (the AI layer's router and
 * openai-type providers, and the agents' own model), over real HTTP:
 * - `POST /v1/chat/completions`: "Echo: <last user message>" (or a fixed `reply`), as JSON or, with
 *   `stream: true`, server-sent events in 4-character deltas, a `finish_reason` chunk, a usage
 *   chunk and `data: [DONE]`;
 * - `GET /v1/models`: `models`.
 * It records every request, fails on demand (`failWith` for every request, `failModels` per
 * model), can delay answers or hold streams open, and notices requests the client aborted.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ChatBody = {
  model?: string;
  messages?: any[];
  stream?: boolean;
  [key: string]: any;
};
export type ReceivedRequest = {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  authorization: string | undefined;
  body: any;
};

export type FakeOpenAi = {
  /** base URL including `/v1` (what ROUTER_BASE_URL, AGENT_MODEL_BASE_URL and the like take) */
  url: string;
  /** the same as `url` */
  baseUrl: string;
  requests: ReceivedRequest[];
  /** fixed reply; unset: "Echo: " and the last user message */
  reply: string | undefined;
  /** answer every request with this status and an OpenAI error body */
  failWith: number | undefined;
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

export const FAKE_USAGE = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };

/** A message's text: a string, or (as OpenAI also accepts, and OpenClaw sends) an array of parts. */
const textOf = (c: unknown): string =>
  Array.isArray(c) ? c.map((p: { type?: string; text?: string }) => (p?.type === 'text' ? (p.text ?? '') : '')).join('') : String(c ?? '');

export async function startFakeOpenAi(options: { apiKey?: string; quiet?: boolean; reply?: string } = {}): Promise<FakeOpenAi> {
  const abortWaiters: (() => void)[] = [];
  const fake: FakeOpenAi = {
    url: '',
    baseUrl: '',
    requests: [],
    reply: options.reply,
    failWith: undefined,
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
      fake.failWith = undefined;
      fake.delayMs = 0;
      fake.holdStreams = false;
      fake.aborted = 0;
    },
    close: () =>
      new Promise((resolve) => {
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
    let body: ChatBody;
    try {
      body = raw ? JSON.parse(raw) : {};
    } catch {
      return json(res, 400, { error: { message: 'bad json' } });
    }
    const path = (req.url ?? '').split('?')[0]!;
    if (!options.quiet)
      fake.requests.push({ method: req.method ?? '', path, headers: req.headers, authorization: req.headers.authorization, body });
    res.on('close', () => {
      if (!res.writableFinished) {
        fake.aborted++;
        for (const w of abortWaiters.splice(0)) w();
      }
    });
    if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      return json(res, 401, { error: { message: 'invalid api key', type: 'invalid_request_error' } });
    }
    if (req.method === 'GET' && path === '/v1/models') return json(res, 200, { data: fake.models });
    if (req.method !== 'POST' || path !== '/v1/chat/completions') return json(res, 404, { error: { message: 'not found' } });
    if (fake.failWith) return json(res, fake.failWith, { error: { message: 'upstream failure', type: 'server_error' } });
    if (fake.delayMs > 0) await new Promise((r) => setTimeout(r, fake.delayMs));
    const model = String(body.model ?? 'fake-model');
    if (fake.failModels.has(model)) return json(res, 500, { error: { message: `model ${model} failed` } });
    const lastUser = [...(body.messages ?? [])].reverse().find((m) => m.role === 'user');
    const content = fake.reply ?? `Echo: ${textOf(lastUser?.content)}`;
    const id = 'chatcmpl-fake';
    const created = Math.floor(Date.now() / 1000);
    if (!body.stream) {
      return json(res, 200, {
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
        usage: FAKE_USAGE,
      });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices, ...extra })}\n\n`);
    const delta = (d: Record<string, unknown>) => chunk([{ index: 0, delta: d, finish_reason: null }]);
    delta({ role: 'assistant', content: '' });
    const parts = content.match(/.{1,4}/gs) ?? [''];
    if (fake.holdStreams) {
      delta({ content: parts[0] });
      return; // never finishes: only the client going away ends it
    }
    for (const p of parts) {
      delta({ content: p });
      await new Promise((r) => setImmediate(r));
    }
    chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]);
    chunk([], { usage: FAKE_USAGE });
    res.end('data: [DONE]\n\n');
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}
