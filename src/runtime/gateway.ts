/**
 * The built-in agent runtime's gateway (what one agent serves on its port): the container probes
 * of §4.12, token auth with the §8 gateway auth rate limit, an OpenAI-compatible chat completions
 * endpoint answered by the model provider the agent is configured with, a WebSocket chat, and the
 * heartbeat the platform triggers. Counters: runtime-stats.ts; flood and slow-client limits:
 * gateway-limits.ts. The WebSocket chat is ws-chat.ts; errors in OpenAI's shape
 * are openai-errors.ts.
 */
import { createServer } from 'node:http';
import { Readable } from 'node:stream';
import fastifyWebsocket from '@fastify/websocket';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import type { Logger } from 'pino';
import { safeEqual } from '../lib/crypto.ts';
import { createAuthGuard } from './auth-guard.ts';
import { createLimiter, DEFAULT_GATEWAY_LIMITS, type GatewayLimits } from './gateway-limits.ts';
import { openAiError } from './openai-errors.ts';
import { withSystemPrompt } from './persona.ts';
import { createRuntimeStats, type RuntimeStats } from './runtime-stats.ts';
import { registerWebSocketChat } from './ws-chat.ts';

export type { GatewayLimits } from './gateway-limits.ts';

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
  /**
   * The one HTTP proxy in front of the gateway that the platform itself runs (an address), whose
   * appended X-Forwarded-For entry names the client. Unset (the default, and the local driver's
   * case): the client address is the connection's, and X-Forwarded-For is never read, so no client
   * can exempt itself, escape its lockout or lock another address out by sending the header.
   */
  trustedProxy?: string;
  limits?: Partial<GatewayLimits>;
  /**
   * §4.12 heartbeat: what the agent runs through its model when the platform wakes it
   * (POST /v1/heartbeat): the prompt, and workspace context read at each run (HEARTBEAT.md).
   */
  heartbeat?: { prompt: string; context?: () => string | undefined };
  /** the configuration's `systemPrompt`: the first system message of every model call (persona.ts) */
  systemPrompt?: string | undefined;
};

/** OpenClaw's default heartbeat prompt, so both runtimes behave alike. */
export const DEFAULT_HEARTBEAT_PROMPT =
  'Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.';

type HeartbeatOutcome = { status: number; body: Record<string, unknown> };

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

export async function createGateway(
  options: GatewayOptions,
): Promise<{ app: FastifyInstance<any, any, any, any>; stats: () => RuntimeStats; flushStats: () => void }> {
  const startedAt = options.startedAt ?? Date.now();
  const limits: GatewayLimits = { ...DEFAULT_GATEWAY_LIMITS, ...options.limits };
  const modelSlots = createLimiter(limits.maxConcurrentModelCalls, limits.modelQueue);
  const guard = createAuthGuard({ loopbackExempt: options.loopbackExempt ?? true });
  const runtimeStats = createRuntimeStats({
    agentId: options.agentId,
    startedAt,
    statsFile: options.statsFile,
    logger: options.logger,
    onTick: () => guard.sweep(),
  });
  const { stats, flushStats, record } = runtimeStats;

  const trustedProxy = options.trustedProxy;
  const app = Fastify({
    loggerInstance: options.logger,
    // our own onResponse line per request instead (probes every 2 s would drown the log)
    logController: new LogController({ disableRequestLogging: true }),
    // §8 names 127.0.0.1 as the trusted proxy; it is trusted only when the platform says it runs one
    // there (AGENT_TRUSTED_PROXY), and then only as the last hop: the client is the entry that proxy
    // appended, never an entry the client wrote itself
    trustProxy: trustedProxy ? (address: string, hop: number) => hop === 0 && address === trustedProxy : false,
    bodyLimit: 4 * 1024 * 1024,
    return503OnClosing: true,
    // slow clients (one byte at a time) are cut off: headers, whole request and idle keep-alive are all bounded
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    serverFactory: (handler) => {
      const server = createServer(
        {
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          // how often Node checks the two timeouts above (its default, 30 s, would let a slow client stay that long)
          connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 2))),
        },
        handler,
      );
      server.keepAliveTimeout = limits.keepAliveTimeoutMs;
      server.headersTimeout = limits.headersTimeoutMs;
      server.requestTimeout = limits.requestTimeoutMs;
      return server;
    },
  });
  app.server.on('connection', runtimeStats.track);
  app.addHook('onClose', async () => runtimeStats.close());
  await app.register(fastifyWebsocket, { options: { maxPayload: limits.wsMaxMessageBytes } });

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
    request.log.info(
      { source: 'gateway', statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      `${request.method} ${path} ${reply.statusCode}`,
    );
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
    const release = await modelSlots.acquire();
    if (!release) {
      reply.header('retry-after', 1);
      return reply
        .code(429)
        .send(openAiError('This agent is busy: too many chat requests at once; retry shortly', 'rate_limit_error', 'AGENT_BUSY'));
    }
    // the slot is held until the answer (or the stream) is finished
    reply.raw.once('close', release);
    const started = Date.now();
    const signal = AbortSignal.timeout(options.model.timeoutMs);
    let upstream: Response;
    try {
      upstream = await complete(
        { ...body, model, messages: withSystemPrompt(body.messages as ChatMessage[], options.systemPrompt) },
        signal,
      );
    } catch (err) {
      record(false, 0);
      request.log.error({ source: 'model', err: (err as Error).message }, 'model provider unreachable');
      const timeout = (err as Error).name === 'TimeoutError';
      return reply
        .code(timeout ? 504 : 502)
        .send(
          openAiError(timeout ? 'The model provider did not answer in time' : 'The model provider could not be reached', 'upstream_error'),
        );
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
    runtimeStats.received(Number(upstream.headers.get('content-length') ?? 0));
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
    if (options.reportTurn && userText && typeof replyText === 'string')
      options.reportTurn({ user: userText, reply: replyText, responseMs: ms, channel: 'api' });
    return reply.send(json);
  });

  /**
   * POST /v1/heartbeat `{runId?}` (gateway token): runs the heartbeat prompt through the model and
   * answers `{ok:true, runId, reply, model, ms}`. A run id seen before (the platform retrying a
   * heartbeat whose outcome it did not record) answers the first run's result with
   * `duplicate:true` and does not run the prompt again; the last 100 run ids are remembered.
   */
  const heartbeatRuns = new Map<string, Promise<HeartbeatOutcome>>();
  app.post('/v1/heartbeat', async (request, reply) => {
    if (!options.model.baseUrl) return reply.code(503).send(modelMissing());
    const body = (request.body ?? {}) as { runId?: unknown };
    if (body.runId !== undefined && (typeof body.runId !== 'string' || body.runId.length === 0 || body.runId.length > 200)) {
      return reply.code(400).send(openAiError('`runId` must be a string of 1 to 200 characters', 'invalid_request_error'));
    }
    const runId = body.runId as string | undefined;
    const seen = runId ? heartbeatRuns.get(runId) : undefined;
    if (seen) {
      const first = await seen;
      return reply.code(first.status).send({ ...first.body, duplicate: true });
    }
    const model = options.model.defaultModel;
    if (!model) return reply.code(400).send(openAiError('no default model configured for the heartbeat', 'invalid_request_error'));
    const run = (async (): Promise<HeartbeatOutcome> => {
      const started = Date.now();
      const context = options.heartbeat?.context?.();
      const messages = withSystemPrompt(
        [
          ...(context ? [{ role: 'system', content: `HEARTBEAT.md:\n${context}` }] : []),
          { role: 'user', content: options.heartbeat?.prompt ?? DEFAULT_HEARTBEAT_PROMPT },
        ],
        options.systemPrompt,
      );
      try {
        const res = await complete({ model, messages }, AbortSignal.timeout(options.model.timeoutMs));
        if (!res.ok) {
          await res.body?.cancel();
          return { status: 502, body: openAiError(`model provider answered ${res.status}`, 'upstream_error') };
        }
        const json = (await res.json()) as { choices?: { message?: { content?: unknown } }[] };
        const content = json.choices?.[0]?.message?.content;
        const ms = Date.now() - started;
        request.log.info({ source: 'heartbeat', model, ms, runId }, 'heartbeat ran');
        return { status: 200, body: { ok: true, runId: runId ?? null, reply: typeof content === 'string' ? content : '', model, ms } };
      } catch (err) {
        const timeout = (err as Error).name === 'TimeoutError';
        request.log.error({ source: 'heartbeat', err: (err as Error).message }, 'heartbeat failed');
        return {
          status: timeout ? 504 : 502,
          body: openAiError(
            timeout ? 'The model provider did not answer in time' : 'The model provider could not be reached',
            'upstream_error',
          ),
        };
      }
    })();
    if (runId) {
      heartbeatRuns.set(runId, run);
      if (heartbeatRuns.size > 100) heartbeatRuns.delete(heartbeatRuns.keys().next().value!);
    }
    const outcome = await run;
    // only a run that happened is remembered: a failed one may be tried again under the same id
    if (runId && outcome.status !== 200) heartbeatRuns.delete(runId);
    return reply.code(outcome.status).send(outcome.body);
  });

  registerWebSocketChat(app, { options, limits, modelSlots, complete, record, modelMissing });

  return { app, stats, flushStats };
}
