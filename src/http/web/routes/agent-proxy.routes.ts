/**
 * The authenticated gateway proxy (docs/agents.md "Talk to your agent"): each agent's gateway is
 * reachable through the web app, by its owner only, and the platform adds the gateway token
 * itself, so the token never reaches a browser or a client.
 *
 * - HTTP: `/api/agents/:id/v1/*` → the gateway's `/v1/*` (the OpenAI-compatible API: point the
 *   official `openai` client at `…/api/agents/:id/v1` with one of your `sk_` keys).
 * - WebSocket: `/api/agents/:id/ws` → the gateway's `/ws` chat.
 * - One host per agent: a request whose Host is `<id>.<AGENTS_DOMAIN>` goes, whatever its path
 *   (except the platform's own `/api/…` routes), to that agent's gateway.
 *
 * Who: the owner's session cookie, or `Authorization: Bearer sk_…` with one of the owner's API
 * keys. Anyone else's agent, or no agent, is 404 alike. Bodies and answers are streamed through
 * (SSE completions arrive as they are produced); only hop-by-hop headers, cookies and the
 * caller's credentials are dropped.
 */
import fastifyWebsocket from '@fastify/websocket';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Agent, request as undiciRequest } from 'undici';
import WebSocket from 'ws';
import { z } from 'zod';
import type { AgentTarget, AgentTargets } from '../../../domains/chat/agent-target.ts';
import { API_KEY_PREFIX, type KeysService } from '../../../domains/keys/keys.service.ts';
import { AppError, forbidden, isAppError, unauthorized } from '../../../lib/errors.ts';
import type { App } from '../../shared/base-app.ts';
import { CROSS_SITE_MESSAGE } from '../../shared/origin-check.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorSchema } from '../../shared/schemas.ts';
import type { SessionAuth } from '../../shared/session.ts';

/** Request headers never forwarded: hop-by-hop, our credentials, and what undici sets itself. */
const DROP_REQUEST = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'cookie',
  'authorization',
  'content-length',
  'expect',
]);
const DROP_RESPONSE = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'set-cookie',
  'proxy-authenticate',
]);

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

export type AgentProxyDeps = {
  targets: AgentTargets;
  keys: KeysService;
  session: SessionAuth;
  /** AGENTS_DOMAIN: `<id>.<AGENTS_DOMAIN>` is the agent's own host */
  agentsDomain: string;
  /** PUBLIC_URL and CSRF_ALLOWED_ORIGINS: the only origins whose pages may open a cookie WebSocket */
  allowedOrigins: readonly string[];
  /** how long a proxied request may wait for the agent's headers / between body chunks */
  timeoutMs?: number;
};

/**
 * Public scope: the proxy authenticates each call itself (an `sk_` key, or else the session
 * cookie) because either credential is accepted, and answers with its own 401 text.
 */
export const agentProxyRoutes = (deps: AgentProxyDeps): RouteModule<'public'> => ({
  prefix: '',
  public: async (app: App) => {
    const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });
    app.addHook('onClose', async () => {
      await dispatcher.close();
    });
    const timeoutMs = deps.timeoutMs ?? 300_000;
    const allowedOrigins = new Set(deps.allowedOrigins.map((o) => new URL(o).origin));
    const hostPattern = new RegExp(
      `^([a-z0-9][a-z0-9-]{2,62})\\.${deps.agentsDomain.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?::\\d+)?$`,
      'i',
    );

    /** The caller: a bearer `sk_` key when one is sent (it wins), else the session cookie. */
    async function caller(request: FastifyRequest): Promise<string> {
      const auth = request.headers.authorization;
      if (typeof auth === 'string' && /^bearer\s+/i.test(auth)) {
        const key = auth.replace(/^bearer\s+/i, '').trim();
        if (!key.startsWith(API_KEY_PREFIX)) throw unauthorized('Invalid API key');
        const v = await deps.keys.validate(key);
        if (!v.valid) throw unauthorized('Invalid API key');
        return v.userId;
      }
      const user = await deps.session.user(request);
      if (!user) throw unauthorized('Sign in, or send one of your API keys as `Authorization: Bearer sk_…`');
      return user.id;
    }

    async function forward(request: FastifyRequest, reply: FastifyReply, agentId: string, path: string) {
      const userId = await caller(request);
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(request.headers)) {
        if (value !== undefined && !DROP_REQUEST.has(name)) headers[name] = value;
      }
      const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
      const body = request.body as Buffer | undefined;
      const send = (t: AgentTarget) =>
        undiciRequest(`${t.baseUrl}${path}${query}`, {
          method: request.method as (typeof METHODS)[number],
          headers: { ...headers, authorization: `Bearer ${t.token}` },
          body: body && body.length > 0 ? body : null,
          dispatcher,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
      let upstream: Awaited<ReturnType<typeof undiciRequest>>;
      try {
        upstream = await send(await deps.targets.byId(userId, agentId));
      } catch (err) {
        if (isAppError(err)) throw err;
        // a cached address may be stale (the agent restarted elsewhere): look it up again, once
        deps.targets.forget(userId, agentId);
        try {
          upstream = await send(await deps.targets.byId(userId, agentId, { fresh: true }));
        } catch (retryErr) {
          if (isAppError(retryErr)) throw retryErr;
          throw new AppError('AGENT_UNAVAILABLE', 'The agent could not be reached');
        }
      }
      reply.code(upstream.statusCode);
      for (const [name, value] of Object.entries(upstream.headers)) {
        if (value !== undefined && !DROP_RESPONSE.has(name)) reply.header(name, value);
      }
      request.raw.once('close', () => {
        if (!upstream.body.destroyed) upstream.body.destroy();
      });
      return reply.send(upstream.body);
    }

    /** WebSocket pipe to the gateway's `/ws`; frames are passed through as they are. */
    function pipeSocket(client: WebSocket, baseUrl: string, token: string) {
      const pending: { data: WebSocket.RawData; binary: boolean }[] = [];
      const upstream = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}/ws`, { headers: { authorization: `Bearer ${token}` } });
      const closeBoth = (code?: number, reason?: Buffer) => {
        const c = code && code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1011;
        if (client.readyState === WebSocket.OPEN) client.close(c, reason);
        if (upstream.readyState === WebSocket.OPEN) upstream.close(c, reason);
        else if (upstream.readyState === WebSocket.CONNECTING) upstream.terminate();
      };
      client.on('message', (data, binary) => {
        if (upstream.readyState === WebSocket.OPEN) upstream.send(data, { binary });
        else if (pending.length < 64) pending.push({ data, binary });
      });
      upstream.on('open', () => {
        for (const m of pending.splice(0)) upstream.send(m.data, { binary: m.binary });
      });
      upstream.on('message', (data, binary) => {
        if (client.readyState === WebSocket.OPEN) client.send(data, { binary });
      });
      upstream.on('close', (code, reason) => closeBoth(code, reason));
      upstream.on('error', () => closeBoth(1011));
      upstream.on('unexpected-response', (_req, res) => {
        res.resume();
        closeBoth(1011);
      });
      client.on('close', (code, reason) => closeBoth(code === 1005 ? 1000 : code, reason));
      client.on('error', () => closeBoth(1011));
    }

    /** A cookie-authenticated WebSocket from another site's page would act as the owner (CSWSH). */
    function refuseCrossSiteSocket(request: FastifyRequest) {
      if (typeof request.headers.authorization === 'string') return;
      const origin = request.headers.origin;
      if (typeof origin === 'string' && !allowedOrigins.has(origin)) throw forbidden(CROSS_SITE_MESSAGE);
    }

    await app.register(async (scope) => {
      // the proxy passes bodies through untouched: no JSON parsing, no validation
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
      if (!scope.hasDecorator('websocketServer')) await scope.register(fastifyWebsocket);

      const idParams = z.object({ id: z.string().min(1).max(64) });
      // the whole /v1 API of the agent; the chat completions operation is documented on its own
      scope.route({
        method: [...METHODS],
        url: '/api/agents/:id/v1/*',
        schema: { hide: true },
        handler: (request, reply) => {
          const { id, '*': rest } = request.params as { id: string; '*': string };
          return forward(request, reply, id, `/v1/${rest}`);
        },
      });
      scope.post('/api/agents/:id/v1/chat/completions', {
        schema: {
          tags: ['chat'],
          summary: "Your agent's OpenAI-compatible chat completions, through the platform",
          description:
            "Proxies to the agent's gateway (every path under `/api/agents/{id}/v1/`, this one included, goes to the gateway's `/v1/…`; " +
            'streaming answers pass through as they are produced) with the gateway token added by the platform. Point the official `openai` ' +
            "client at `…/api/agents/{id}/v1` with one of your API keys, or send your session cookie. The answer and its status are the agent's " +
            "own (OpenAI format); the platform's own answers are 401 without credentials, 404 for an agent that is not yours, 502 " +
            '`AGENT_UNAVAILABLE` when the agent cannot be reached and 503 `NO_GATEWAY_TOKEN`.',
          params: idParams,
          body: z.object({}).passthrough().describe('An OpenAI chat completions request, passed to the agent as it is'),
          security: [{ sessionCookie: [] }, { apiKey: [] }],
          response: {
            200: z.object({}).passthrough().describe("The agent's chat completion (JSON), or text/event-stream when `stream: true`"),
            401: errorSchema,
            404: errorSchema,
            502: errorSchema,
            503: errorSchema,
          },
        },
        // the body is passed through as bytes: the schema documents it, the agent validates it
        validatorCompiler: () => () => true,
        serializerCompiler: () => (data) => JSON.stringify(data),
        handler: (request, reply) => forward(request, reply, (request.params as { id: string }).id, '/v1/chat/completions'),
      });

      scope.get(
        '/api/agents/:id/ws',
        {
          websocket: true,
          schema: {
            tags: ['chat'],
            summary: "Your agent's WebSocket chat, through the platform",
            description:
              "Upgrades to a WebSocket piped to the agent's gateway `/ws` (frames `{type:'chat', content}` → `{type:'reply', content}`). " +
              "This is the `websocketUrl` agents report. Session cookie (from the platform's own pages only) or `Authorization: Bearer sk_…`.",
            params: idParams,
            security: [{ sessionCookie: [] }, { apiKey: [] }],
            response: { 401: errorSchema, 403: errorSchema, 404: errorSchema, 503: errorSchema },
          },
          preValidation: async (request) => {
            refuseCrossSiteSocket(request);
            const userId = await caller(request);
            const t = await deps.targets.byId(userId, (request.params as { id: string }).id);
            (request as FastifyRequest & { agentTarget?: typeof t }).agentTarget = t;
          },
        },
        (socket, request) => {
          const t = (request as FastifyRequest & { agentTarget?: { baseUrl: string; token: string } }).agentTarget!;
          pipeSocket(socket, t.baseUrl, t.token);
        },
      );

      // one host per agent: everything on <id>.<AGENTS_DOMAIN> goes to that agent's gateway
      const hostConstraint = { host: hostPattern };
      const agentFromHost = (request: FastifyRequest) => hostPattern.exec(String(request.headers.host ?? ''))![1]!.toLowerCase();
      scope.get(
        '/ws',
        {
          websocket: true,
          constraints: hostConstraint,
          schema: { hide: true },
          preValidation: async (request) => {
            refuseCrossSiteSocket(request);
            const userId = await caller(request);
            (request as FastifyRequest & { agentTarget?: unknown }).agentTarget = await deps.targets.byId(userId, agentFromHost(request));
          },
        },
        (socket, request) => {
          const t = (request as FastifyRequest & { agentTarget?: { baseUrl: string; token: string } }).agentTarget!;
          pipeSocket(socket, t.baseUrl, t.token);
        },
      );
      scope.route({
        method: [...METHODS],
        url: '/*',
        constraints: hostConstraint,
        schema: { hide: true },
        handler: (request, reply) => forward(request, reply, agentFromHost(request), request.url.split('?', 1)[0]!),
      });
    });
  },
});
