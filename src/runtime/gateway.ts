/**
 * The built-in agent runtime's gateway (what one agent serves on its port): the container probes
 * of §4.12, token auth with the §8 gateway auth rate limit, an OpenAI-compatible chat completions
 * endpoint answered by the model provider the agent is configured with, and a WebSocket chat.
 * Counters (messages, response time, bytes) are written to a stats file the hosting driver reads.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import fastifyWebsocket from '@fastify/websocket';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { LIMITS } from '../config/limits.ts';
import { safeEqual } from '../lib/crypto.ts';
import { createAuthGuard } from './auth-guard.ts';

export type ModelSettings = {
  /** OpenAI-compatible base URL (ending before `/chat/completions`), e.g. https://openrouter.ai/api/v1 */
  baseUrl?: string;
  apiKey?: string;
  /** model used when a request names none */
  defaultModel?: string;
  timeoutMs: number;
};

export type GatewayOptions = {
  gatewayToken: string;
  agentId: string;
  model: ModelSettings;
  logger: Logger;
  /** file the counters are written to (JSON), read by the local driver's stats() */
  statsFile?: string;
  loopbackExempt?: boolean;
  /** extra readiness checks: name → passes */
  readinessChecks?: Record<string, () => boolean>;
  /**
   * Called after each answered chat turn (not awaited), so the platform can store the
   * conversation for GET /api/agents/:id/messages (§4.7). Streamed completions are not reported:
   * the gateway passes their bytes through without assembling the text.
   */
  reportTurn?: (turn: ChatTurn) => void;
  startedAt?: number;
};

export type RuntimeStats = {
  agentId: string;
  startedAt: string;
  messagesProcessed: number;
  messagesFailed: number;
  averageResponseTimeMs: number;
  network: { rxBytes: number; txBytes: number };
  updatedAt: string;
};

type ChatMessage = { role: string; content: unknown };

export type ChatTurn = { user: string; reply: string; responseMs: number; channel: 'api' | 'websocket' };

/** The text of the last user message of an OpenAI-style request, when it is plain text. */
const lastUserText = (messages: unknown): string | undefined => {
  if (!Array.isArray(messages)) return undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as ChatMessage | undefined;
    if (m?.role === 'user') return typeof m.content === 'string' ? m.content : undefined;
  }
  return undefined;
};

const openAiError = (message: string, type: string, code?: string) => ({ error: { message, type, ...(code ? { code } : {}) } });

export async function createGateway(options: GatewayOptions): Promise<{ app: FastifyInstance<any, any, any, any>; stats: () => RuntimeStats; flushStats: () => void }> {
  const startedAt = options.startedAt ?? Date.now();
  const guard = createAuthGuard({ loopbackExempt: options.loopbackExempt ?? true });
  const counters = { processed: 0, failed: 0, totalMs: 0, rx: 0, tx: 0 };
  const openSockets = new Set<import('node:net').Socket>();
  let dirty = true;

  const stats = (): RuntimeStats => {
    let rx = counters.rx;
    let tx = counters.tx;
    for (const s of openSockets) {
      rx += s.bytesRead;
      tx += s.bytesWritten;
    }
    return {
      agentId: options.agentId,
      startedAt: new Date(startedAt).toISOString(),
      messagesProcessed: counters.processed,
      messagesFailed: counters.failed,
      averageResponseTimeMs: counters.processed ? Math.round(counters.totalMs / counters.processed) : 0,
      network: { rxBytes: rx, txBytes: tx },
      updatedAt: new Date().toISOString(),
    };
  };
  const flushStats = () => {
    if (!options.statsFile) return;
    try {
      const tmp = `${options.statsFile}.tmp`;
      writeFileSync(tmp, JSON.stringify(stats()));
      renameSync(tmp, options.statsFile);
      dirty = false;
    } catch (err) {
      options.logger.warn({ err }, 'could not write the stats file');
    }
  };
  const record = (ok: boolean, ms: number) => {
    if (ok) {
      counters.processed += 1;
      counters.totalMs += ms;
    } else counters.failed += 1;
    dirty = true;
  };
  const statsTimer = setInterval(() => {
    if (dirty || openSockets.size > 0) flushStats();
    guard.sweep();
  }, 1_000);
  statsTimer.unref();

  const app = Fastify({
    loggerInstance: options.logger,
    // our own onResponse line per request instead (probes every 2 s would drown the log)
    logController: new LogController({ disableRequestLogging: true }),
    // §8: trusted proxies 127.0.0.1 (the container's TCP proxy); the client IP then comes from X-Forwarded-For
    trustProxy: '127.0.0.1',
    bodyLimit: 4 * 1024 * 1024,
    return503OnClosing: true,
  });
  app.server.on('connection', (socket) => {
    openSockets.add(socket);
    socket.on('close', () => {
      openSockets.delete(socket);
      counters.rx += socket.bytesRead;
      counters.tx += socket.bytesWritten;
      dirty = true;
    });
  });
  app.addHook('onClose', async () => {
    clearInterval(statsTimer);
    flushStats();
  });
  await app.register(fastifyWebsocket, { options: { maxPayload: 1024 * 1024 } });

  // §4.12: both probes unauthenticated
  const PUBLIC = new Set(['/healthz', '/readyz']);
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0]!;
    if (PUBLIC.has(path)) return;
    const ip = request.ip;
    const locked = guard.lockedFor(ip);
    if (locked > 0) {
      reply.header('retry-after', Math.ceil(locked / 1000));
      return reply.code(429).send({ error: 'Too many failed authentication attempts', retryAfterMs: locked });
    }
    const header = request.headers.authorization;
    let presented = header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
    // browsers cannot set headers on a WebSocket: the chat socket also takes ?token=
    if (presented === undefined && path === '/ws') presented = (request.query as Record<string, string> | undefined)?.token;
    if (!presented || !safeEqual(presented, options.gatewayToken)) {
      if (guard.fail(ip)) request.log.warn({ ip }, 'gateway auth lockout started');
      return reply.code(401).send({ error: 'Unauthorized' });
    }
  });
  app.addHook('onResponse', async (request, reply) => {
    const path = request.url.split('?')[0]!;
    if (PUBLIC.has(path)) return;
    request.log.info({ source: 'gateway', statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime) }, `${request.method} ${path} ${reply.statusCode}`);
  });

  app.get('/healthz', async () => ({ ok: true, status: 'live' }));
  app.get('/readyz', async (_request, reply) => {
    const checks: Record<string, () => boolean> = {
      model: () => Boolean(options.model.baseUrl),
      ...options.readinessChecks,
    };
    const failing = Object.entries(checks)
      .filter(([, check]) => {
        try {
          return !check();
        } catch {
          return true;
        }
      })
      .map(([name]) => name);
    const ready = failing.length === 0;
    return reply.code(ready ? 200 : 503).send({ ready, failing, uptimeMs: Date.now() - startedAt });
  });

  app.get('/v1/stats', async () => stats());

  /** One non-streaming completion from the configured provider; throws with a status on failure. */
  async function complete(body: Record<string, unknown>, signal: AbortSignal): Promise<Response> {
    const base = options.model.baseUrl!.replace(/\/+$/, '');
    return fetch(`${base}/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(options.model.apiKey ? { authorization: `Bearer ${options.model.apiKey}` } : {}),
      },
      body: JSON.stringify(body),
      signal,
    });
  }

  const modelMissing = () =>
    openAiError(
      'No model is configured for this agent: set AGENT_MODEL_BASE_URL (and AGENT_MODEL_API_KEY) for its runtime',
      'model_not_configured',
      'MODEL_NOT_CONFIGURED',
    );

  app.post('/v1/chat/completions', async (request, reply) => {
    if (!options.model.baseUrl) return reply.code(503).send(modelMissing());
    const body = request.body as Record<string, unknown> | undefined;
    if (!body || typeof body !== 'object' || !Array.isArray(body.messages) || body.messages.length === 0) {
      return reply.code(400).send(openAiError('`messages` must be a non-empty array', 'invalid_request_error'));
    }
    const model = typeof body.model === 'string' && body.model ? body.model : options.model.defaultModel;
    if (!model) return reply.code(400).send(openAiError('`model` is required (no default model configured)', 'invalid_request_error'));
    const started = Date.now();
    const signal = AbortSignal.timeout(options.model.timeoutMs);
    let upstream: Response;
    try {
      upstream = await complete({ ...body, model }, signal);
    } catch (err) {
      record(false, 0);
      request.log.error({ source: 'model', err: (err as Error).message }, 'model provider unreachable');
      const timeout = (err as Error).name === 'TimeoutError';
      return reply
        .code(timeout ? 504 : 502)
        .send(openAiError(timeout ? 'The model provider did not answer in time' : 'The model provider could not be reached', 'upstream_error'));
    }
    if (!upstream.ok) {
      record(false, 0);
      const text = await upstream.text().catch(() => '');
      request.log.warn({ source: 'model', status: upstream.status }, 'model provider returned an error');
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = openAiError(text.slice(0, 500) || `model provider answered ${upstream.status}`, 'upstream_error');
      }
      // 4xx from the provider is the caller's problem and passes through; 5xx becomes 502
      return reply.code(upstream.status >= 500 ? 502 : upstream.status).send(parsed);
    }
    counters.rx += Number(upstream.headers.get('content-length') ?? 0);
    if (body.stream === true && upstream.body) {
      const stream = Readable.fromWeb(upstream.body as import('node:stream/web').ReadableStream);
      stream.on('end', () => record(true, Date.now() - started));
      stream.on('error', () => record(false, 0));
      reply.header('content-type', upstream.headers.get('content-type') ?? 'text/event-stream');
      reply.header('cache-control', 'no-cache');
      return reply.send(stream);
    }
    const json = await upstream.json().catch(() => undefined);
    if (json === undefined) {
      record(false, 0);
      return reply.code(502).send(openAiError('The model provider returned invalid JSON', 'upstream_error'));
    }
    const ms = Date.now() - started;
    record(true, ms);
    request.log.info({ source: 'chat', model, ms }, 'chat completion answered');
    const userText = lastUserText(body.messages);
    const replyText = (json as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message?.content;
    if (options.reportTurn && userText && typeof replyText === 'string') options.reportTurn({ user: userText, reply: replyText, responseMs: ms, channel: 'api' });
    return reply.send(json);
  });

  // WebSocket chat: {type:'chat', content} → {type:'reply', content}; the socket keeps the conversation
  app.get('/ws', { websocket: true }, (socket, request) => {
    const history: ChatMessage[] = [];
    socket.on('message', async (raw: Buffer) => {
      let msg: { type?: unknown; content?: unknown; model?: unknown };
      try {
        msg = JSON.parse(raw.toString('utf8'));
      } catch {
        socket.send(JSON.stringify({ type: 'error', error: 'messages must be JSON' }));
        return;
      }
      if (msg.type === 'ping') {
        socket.send(JSON.stringify({ type: 'pong' }));
        return;
      }
      if (msg.type !== 'chat' || typeof msg.content !== 'string' || msg.content.length === 0) {
        socket.send(JSON.stringify({ type: 'error', error: "expected {type:'chat', content:string}" }));
        return;
      }
      if (!options.model.baseUrl) {
        socket.send(JSON.stringify({ type: 'error', error: modelMissing().error.message, code: 'MODEL_NOT_CONFIGURED' }));
        return;
      }
      const model = typeof msg.model === 'string' && msg.model ? msg.model : options.model.defaultModel;
      history.push({ role: 'user', content: msg.content });
      while (history.length > 40) history.shift();
      const started = Date.now();
      try {
        const res = await complete({ model, messages: history }, AbortSignal.timeout(Math.min(LIMITS.chatWebSocketTimeoutMs, options.model.timeoutMs)));
        if (!res.ok) throw new Error(`model provider answered ${res.status}`);
        const json = (await res.json()) as { choices?: { message?: { content?: string } }[] };
        const content = json.choices?.[0]?.message?.content ?? '';
        history.push({ role: 'assistant', content });
        record(true, Date.now() - started);
        request.log.info({ source: 'chat', model, ms: Date.now() - started, channel: 'websocket' }, 'chat reply sent');
        socket.send(JSON.stringify({ type: 'reply', content }));
        options.reportTurn?.({ user: msg.content, reply: content, responseMs: Date.now() - started, channel: 'websocket' });
      } catch (err) {
        history.pop();
        record(false, 0);
        request.log.error({ source: 'chat', err: (err as Error).message }, 'websocket chat failed');
        const timeout = (err as Error).name === 'TimeoutError';
        socket.send(JSON.stringify({ type: 'error', error: timeout ? 'The model provider did not answer in time' : 'The model provider failed' }));
      }
    });
  });

  return { app, stats, flushStats };
}
