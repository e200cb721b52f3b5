/**
 * The built-in agent runtime's gateway (what one agent serves on its port): the container probes
 * of §4.12, token auth with the §8 gateway auth rate limit, an OpenAI-compatible chat completions
 * endpoint answered by the model provider the agent is configured with, a WebSocket chat, and the
 * heartbeat the platform triggers. Counters: runtime-stats.ts; flood and slow-client limits:
 * gateway-limits.ts; the HTTP layer (node:http, no framework, for an agent's memory):
 * gateway-http.ts. The WebSocket chat is ws-chat.ts; errors in OpenAI's shape are openai-errors.ts.
 */
import type { ServerResponse } from 'node:http';
import { DEFAULT_GATEWAY_LIMITS, type GatewayLimits, KEY_ID_HEADER } from '../config/limits.ts';
import { createAuthGuard, tokenMatcher } from './auth-guard.ts';
import { createGatewayServer, type GatewayApp, type GatewayRequest, type Rejection, sendJson } from './gateway-http.ts';
import { createLimiter } from './gateway-limits.ts';
import { namedKey, postJson, type UpstreamResponse } from './model-client.ts';
import { openAiError } from './openai-errors.ts';
import { withSystemPrompt } from './persona.ts';
import type { RuntimeLogger } from './runtime-log.ts';
import { createRuntimeStats, type RuntimeStats } from './runtime-stats.ts';
import { createWebSocketChat } from './ws-chat.ts';

export type { GatewayLimits } from '../config/limits.ts';

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
  logger: RuntimeLogger;
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
): Promise<{ app: GatewayApp; stats: () => RuntimeStats; flushStats: () => void }> {
  const startedAt = options.startedAt ?? Date.now();
  const log = options.logger;
  const limits: GatewayLimits = { ...DEFAULT_GATEWAY_LIMITS, ...options.limits };
  const modelSlots = createLimiter(limits.maxConcurrentModelCalls, limits.modelQueue);
  const guard = createAuthGuard({ loopbackExempt: options.loopbackExempt ?? true });
  const tokenMatches = tokenMatcher(options.gatewayToken);
  const runtimeStats = createRuntimeStats({
    agentId: options.agentId,
    startedAt,
    statsFile: options.statsFile,
    logger: log,
    onTick: () => guard.sweep(),
  });
  const { stats, flushStats, record } = runtimeStats;

  // §4.12: both probes unauthenticated
  const PUBLIC = new Set(['/healthz', '/readyz']);
  /** Every other request and upgrade presents the gateway token, unless its address is locked out (§8). */
  const authenticate = (req: GatewayRequest): Rejection | undefined => {
    if (PUBLIC.has(req.path)) return undefined;
    const locked = guard.lockedFor(req.ip);
    if (locked > 0)
      return {
        status: 429,
        body: { error: 'Too many failed authentication attempts', retryAfterMs: locked },
        headers: { 'retry-after': Math.ceil(locked / 1000) },
      };
    const header = req.headers.authorization;
    let presented = header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
    // browsers cannot set headers on a WebSocket: the chat socket also takes ?token=
    if (presented === undefined && req.path === '/ws') presented = req.query.get('token') ?? undefined;
    if (!presented || !tokenMatches(presented)) {
      if (guard.fail(req.ip)) log.warn({ ip: req.ip }, 'gateway auth lockout started');
      return { status: 401, body: { error: 'Unauthorized' } };
    }
    return undefined;
  };

  /**
   * One completion from the configured provider; rejects when it cannot be reached or the signal
   * ends it. `keyId`: the API key the platform said the request came with (KEY_ID_HEADER), named to
   * the model gateway so the call is charged to it (docs/payments.md "API keys").
   */
  function complete(body: Record<string, unknown>, signal: AbortSignal, keyId?: string): Promise<UpstreamResponse> {
    const base = options.model.baseUrl!.replace(/\/+$/, '');
    const headers: Record<string, string> = options.model.apiKey ? { authorization: `Bearer ${options.model.apiKey}` } : {};
    if (keyId) headers[KEY_ID_HEADER] = keyId;
    return postJson(`${base}/chat/completions`, body, headers, signal);
  }

  const modelMissing = () =>
    openAiError(
      // the platform launches an agent without a model only when it has no model provider, so that is
      // what the owner is told first; the runtime's own settings are for a runtime run by hand
      'No model is configured for this agent: the platform has no model provider (its operator sets ROUTER_BASE_URL and ' +
        'ROUTER_API_KEY, or a provider key: docs/configuration.md). A runtime run on its own takes AGENT_MODEL_BASE_URL and AGENT_MODEL_API_KEY.',
      'model_not_configured',
      'MODEL_NOT_CONFIGURED',
    );

  function readyz(_req: GatewayRequest, res: ServerResponse) {
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
    sendJson(res, ready ? 200 : 503, { ready, failing, uptimeMs: Date.now() - startedAt });
  }

  async function chatCompletions(req: GatewayRequest, res: ServerResponse) {
    if (!options.model.baseUrl) return sendJson(res, 503, modelMissing());
    const body = req.body as Record<string, unknown> | undefined;
    if (!body || typeof body !== 'object' || !Array.isArray(body.messages) || body.messages.length === 0) {
      return sendJson(res, 400, openAiError('`messages` must be a non-empty array', 'invalid_request_error'));
    }
    const model = typeof body.model === 'string' && body.model ? body.model : options.model.defaultModel;
    if (!model) return sendJson(res, 400, openAiError('`model` is required (no default model configured)', 'invalid_request_error'));
    const release = await modelSlots.acquire();
    if (!release) {
      return sendJson(
        res,
        429,
        openAiError('This agent is busy: too many chat requests at once; retry shortly', 'rate_limit_error', 'AGENT_BUSY'),
        { 'retry-after': 1 },
      );
    }
    // the slot is held until the answer (or the stream) is finished
    res.once('close', release);
    const started = Date.now();
    const signal = AbortSignal.timeout(options.model.timeoutMs);
    let upstream: UpstreamResponse;
    try {
      upstream = await complete(
        { ...body, model, messages: withSystemPrompt(body.messages as ChatMessage[], options.systemPrompt) },
        signal,
        namedKey(req.headers[KEY_ID_HEADER]),
      );
    } catch (err) {
      record(false, 0);
      log.error({ source: 'model', err: (err as Error).message }, 'model provider unreachable');
      const timeout = (err as Error).name === 'TimeoutError';
      return sendJson(
        res,
        timeout ? 504 : 502,
        openAiError(timeout ? 'The model provider did not answer in time' : 'The model provider could not be reached', 'upstream_error'),
      );
    }
    if (!upstream.ok) {
      record(false, 0);
      const text = await upstream.text().catch(() => '');
      log.warn({ source: 'model', status: upstream.status }, 'model provider returned an error');
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = openAiError(text.slice(0, 500) || `model provider answered ${upstream.status}`, 'upstream_error');
      }
      // 4xx from the provider is the caller's problem and passes through; 5xx becomes 502
      return sendJson(res, upstream.status >= 500 ? 502 : upstream.status, parsed);
    }
    runtimeStats.received(Number(upstream.header('content-length') ?? 0));
    if (body.stream === true) {
      const stream = upstream.body;
      stream.on('end', () => record(true, Date.now() - started));
      stream.on('error', () => record(false, 0));
      res.writeHead(200, { 'content-type': upstream.header('content-type') ?? 'text/event-stream', 'cache-control': 'no-cache' });
      stream.pipe(res);
      // a caller that went away stops the provider's stream too
      res.once('close', () => stream.destroy());
      return;
    }
    const json = await upstream.json().catch(() => undefined);
    if (json === undefined) {
      record(false, 0);
      return sendJson(res, 502, openAiError('The model provider returned invalid JSON', 'upstream_error'));
    }
    const ms = Date.now() - started;
    record(true, ms);
    log.info({ source: 'chat', model, ms }, 'chat completion answered');
    const userText = lastUserText(body.messages);
    const replyText = (json as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message?.content;
    if (options.reportTurn && userText && typeof replyText === 'string')
      options.reportTurn({ user: userText, reply: replyText, responseMs: ms, channel: 'api' });
    sendJson(res, 200, json);
  }

  /**
   * POST /v1/heartbeat `{runId?}` (gateway token): runs the heartbeat prompt through the model and
   * answers `{ok:true, runId, reply, model, ms}`. A run id seen before (the platform retrying a
   * heartbeat whose outcome it did not record) answers the first run's result with
   * `duplicate:true` and does not run the prompt again; the last 100 run ids are remembered.
   */
  const heartbeatRuns = new Map<string, Promise<HeartbeatOutcome>>();
  async function heartbeat(req: GatewayRequest, res: ServerResponse) {
    if (!options.model.baseUrl) return sendJson(res, 503, modelMissing());
    const body = (req.body ?? {}) as { runId?: unknown };
    if (body.runId !== undefined && (typeof body.runId !== 'string' || body.runId.length === 0 || body.runId.length > 200)) {
      return sendJson(res, 400, openAiError('`runId` must be a string of 1 to 200 characters', 'invalid_request_error'));
    }
    const runId = body.runId as string | undefined;
    const seen = runId ? heartbeatRuns.get(runId) : undefined;
    if (seen) {
      const first = await seen;
      return sendJson(res, first.status, { ...first.body, duplicate: true });
    }
    const model = options.model.defaultModel;
    if (!model) return sendJson(res, 400, openAiError('no default model configured for the heartbeat', 'invalid_request_error'));
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
          res.discard();
          return { status: 502, body: openAiError(`model provider answered ${res.status}`, 'upstream_error') };
        }
        const json = (await res.json()) as { choices?: { message?: { content?: unknown } }[] };
        const content = json.choices?.[0]?.message?.content;
        const ms = Date.now() - started;
        log.info({ source: 'heartbeat', model, ms, runId }, 'heartbeat ran');
        return { status: 200, body: { ok: true, runId: runId ?? null, reply: typeof content === 'string' ? content : '', model, ms } };
      } catch (err) {
        const timeout = (err as Error).name === 'TimeoutError';
        log.error({ source: 'heartbeat', err: (err as Error).message }, 'heartbeat failed');
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
    sendJson(res, outcome.status, outcome.body);
  }

  const wsChat = createWebSocketChat({ options, limits, modelSlots, complete, record, modelMissing, log });

  const app = createGatewayServer({
    limits,
    // §8 names 127.0.0.1 as the trusted proxy; it is trusted only when the platform says it runs one
    // there (AGENT_TRUSTED_PROXY), and then only as the last hop: the client is the entry that proxy
    // appended, never an entry the client wrote itself
    trustedProxy: options.trustedProxy,
    guard: authenticate,
    routes: {
      'GET /healthz': (_req, res) => sendJson(res, 200, { ok: true, status: 'live' }),
      'GET /readyz': readyz,
      'GET /v1/stats': (_req, res) => sendJson(res, 200, stats()),
      'POST /v1/chat/completions': chatCompletions,
      'POST /v1/heartbeat': heartbeat,
      // the chat socket's path answers only upgrades
      'GET /ws': (_req, res) => {
        res.writeHead(404).end();
      },
    },
    upgrade: { path: '/ws', handle: wsChat.upgrade },
    // one line per request except the probes (every 2 s, they would drown the log)
    onResponse: (req, status, ms) => {
      if (!PUBLIC.has(req.path))
        log.info({ source: 'gateway', statusCode: status, ms: Math.round(ms) }, `${req.method} ${req.path} ${status}`);
    },
    onConnection: runtimeStats.track,
    onClosing: wsChat.close,
    onClosed: runtimeStats.close,
    onError: (err, req) => log.error({ source: 'gateway', err: err.message }, `${req.method} ${req.path} failed`),
  });

  return { app, stats, flushStats };
}
