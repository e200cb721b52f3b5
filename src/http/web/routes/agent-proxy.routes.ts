/**
 * The authenticated gateway proxy (docs/agents.md "Talk to your agent"): each agent's gateway is
 * reachable through the web app, by its owner only, and the platform adds the gateway token
 * itself, so the token never reaches a browser or a client.
 *
 * - HTTP: `/api/agents/:id/v1/*` → the gateway's `/v1/*` (the OpenAI-compatible API: point the
 *   official `openai` client at `…/api/agents/:id/v1` with one of your `sk_` keys). The platform
 *   answers `GET …/v1/models` itself (the agent's model), and a chat completion without a model or
 *   with `model: "default"` is sent as the agent's model (`agent-client/agent-model.rules.ts`).
 * - WebSocket: `/api/agents/:id/ws` → the gateway's `/ws` chat.
 * - One host per agent: a request whose Host is `<id>.<AGENTS_DOMAIN>` goes, whatever its path
 *   (except the platform's own `/api/…` routes), to that agent's gateway.
 *
 * The calls themselves (URL, gateway token, stale-address retry, timeouts, errors) are the agent
 * gateway client's (`src/domains/agents/agent-client/agent.client.ts`); this module decides who may call,
 * which headers pass, and how much a WebSocket may hold.
 *
 * Who: the owner's session cookie, or `Authorization: Bearer sk_…` with one of the owner's API
 * keys. Anyone else's agent, or no agent, is 404 alike. Bodies and answers are streamed through
 * (SSE completions arrive as they are produced); hop-by-hop headers, cookies and the caller's
 * credentials are dropped.
 *
 * An agent is not trusted with the platform's origin (docs/agents.md "Agent content and streams"):
 * its answers are sandboxed and never served as a page (docs/security.md N6), its redirects stay
 * within its own paths (N26), its WebSocket is bounded (N10), and whatever is open ends when the
 * session or key it was opened with is revoked (N12).
 *
 * A streamed chat completion (`POST …/v1/chat/completions` with `stream: true`) is stored like
 * the platform's own chat: the question, and the answer read from the stream as it passes
 * (docs/agents.md "Who stores turns"). Other answers are the runtime's to report.
 */
import fastifyWebsocket from '@fastify/websocket';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Dispatcher } from 'undici';
import type WebSocket from 'ws';
import { z } from 'zod';
import { DEFAULT_GATEWAY_LIMITS } from '../../../config/limits.ts';
import {
  type AgentClient,
  type AgentTarget,
  agentModelList,
  CHAT_BODY_MAX_DEPTH,
  CONTAINMENT_HEADERS,
  DROP_REQUEST,
  dropResponseHeader,
  isInert,
  proxiedLocation,
  REDIRECT_STATUSES,
  tooDeepChatBody,
  withAgentModel,
} from '../../../domains/agents/index.ts';
import { type ChatService, readingAnswer, streamedQuestion } from '../../../domains/chat/index.ts';
import { API_KEY_PREFIX, type KeysService } from '../../../domains/keys/index.ts';
import { AppError, forbidden, tooManyRequests, unauthorized } from '../../../lib/errors.ts';
import type { RevocationWatch, StreamCredential, StreamRevoker } from '../../../lib/eviction-bus.ts';
import type { App } from '../../shared/base-app.ts';
import { CROSS_SITE_MESSAGE } from '../../shared/origin-check.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorSchema } from '../../shared/schemas.ts';
import type { SessionAuth } from '../../shared/session.ts';

/** Bounds of the proxied WebSocket (docs/security.md N10), for each web process. */
const PROXY_SOCKET_LIMITS = {
  /** largest message from the client: the gateway's own limit, so the platform never holds what the agent refuses (1009) */
  clientMessageBytes: DEFAULT_GATEWAY_LIMITS.wsMaxMessageBytes,
  /** largest message from the agent (a long reply) */
  agentMessageBytes: 1024 * 1024,
  /** messages and bytes held for the agent until its socket opens; more closes the client's socket with 1013 */
  pendingMessages: 64,
  pendingBytes: 1024 * 1024,
  /** bytes sent to one side and not yet written out before the other side stops being read */
  unwrittenBytes: 1024 * 1024,
  /** proxied sockets one user may have open at once (429 beyond) */
  socketsPerUser: 32,
} as const;

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

/** The platform's own refusal of a chat completions body, in OpenAI's shape as the agent's answers on that path are. */
const openAiErrorSchema = z
  .object({
    error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }),
  })
  .describe("OpenAI's error shape: a body nested too deep");

/** Runs `fn` when `target` closes, or now when it already has (the client left while we awaited). */
const whenClosed = (target: { destroyed: boolean; once(event: 'close', fn: () => void): unknown }, fn: () => void) => {
  if (target.destroyed) fn();
  else target.once('close', fn);
};

export type AgentProxyDeps = {
  /** reaches the agent: look-ups, forwarded requests and piped WebSockets */
  agentClient: Pick<AgentClient, 'targets' | 'forward' | 'pipeSocket' | 'close'>;
  keys: KeysService;
  session: SessionAuth;
  /** ends what is open when the session or key it was opened with is revoked */
  revoker: StreamRevoker;
  /** AGENTS_DOMAIN: `<id>.<AGENTS_DOMAIN>` is the agent's own host */
  agentsDomain: string;
  /** PUBLIC_URL and CSRF_ALLOWED_ORIGINS: the only origins whose pages may open a cookie WebSocket */
  allowedOrigins: readonly string[];
  /** stores streamed chat turns (without it they pass through unstored) */
  chat?: Pick<ChatService, 'recordTurn'> | undefined;
  /** the model id an agent's runtime is given for its configured model (default: that model) */
  runtimeModel?: (model: string) => string;
};

/**
 * Public scope: the proxy authenticates each call itself (an `sk_` key, or else the session
 * cookie) because either credential is accepted, and answers with its own 401 text.
 */
export const agentProxyRoutes = (deps: AgentProxyDeps): RouteModule<'public'> => ({
  prefix: '',
  public: async (app: App) => {
    app.addHook('onClose', async () => {
      await deps.agentClient.close();
    });
    const allowedOrigins = new Set(deps.allowedOrigins.map((o) => new URL(o).origin));
    const hostPattern = new RegExp(
      `^([a-z0-9][a-z0-9-]{2,62})\\.${deps.agentsDomain.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?::\\d+)?$`,
      'i',
    );

    /** The caller: a bearer `sk_` key when one is sent (it wins), else the session cookie. */
    async function caller(request: FastifyRequest): Promise<{ userId: string; credential: StreamCredential }> {
      const auth = request.headers.authorization;
      if (typeof auth === 'string' && /^bearer\s+/i.test(auth)) {
        const key = auth.replace(/^bearer\s+/i, '').trim();
        if (!key.startsWith(API_KEY_PREFIX)) throw unauthorized('Invalid API key');
        const v = await deps.keys.validate(key);
        if (!v.valid) throw unauthorized('Invalid API key');
        return { userId: v.userId, credential: { apiKey: key } };
      }
      const user = await deps.session.user(request);
      if (!user) throw unauthorized('Sign in, or send one of your API keys as `Authorization: Bearer sk_…`');
      return { userId: user.id, credential: { session: deps.session.token(request)! } };
    }

    /** The agent's model as its runtime knows it, and when the agent was made (404 when not the caller's). */
    async function agentModel(userId: string, agentId: string) {
      const { agent } = await deps.agentClient.targets.byId(userId, agentId);
      return { model: deps.runtimeModel ? deps.runtimeModel(agent.model) : agent.model, createdAt: new Date(agent.created_at) };
    }

    /** Where an agent's paths are on the platform's own host (its `<id>.<AGENTS_DOMAIN>` host mounts them at the root). */
    const prefixOf = (agentId: string) => `/api/agents/${encodeURIComponent(agentId)}`;

    async function forward(request: FastifyRequest, reply: FastifyReply, agentId: string, path: string, prefix: string) {
      const askedAt = new Date();
      const { userId, credential } = await caller(request);
      if (request.method === 'GET' && path === '/v1/models') {
        const { model, createdAt } = await agentModel(userId, agentId);
        return reply.headers(CONTAINMENT_HEADERS).send(agentModelList(model, createdAt));
      }
      let body = (request.body as Buffer | undefined) ?? null;
      if (request.method === 'POST' && path === '/v1/chat/completions') {
        const { model } = await agentModel(userId, agentId);
        // before re-serialising it (withAgentModel): a body thousands of levels deep would overflow the stack
        const tooDeep = tooDeepChatBody(body);
        if (tooDeep) return reply.code(400).headers(CONTAINMENT_HEADERS).send(tooDeep);
        body = withAgentModel(body, model);
      }
      // a streamed answer ends with its credential; watched from here so a revocation meanwhile counts
      const watch = deps.revoker.watch(userId, credential);
      whenClosed(reply.raw, watch.release);
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(request.headers)) {
        if (value !== undefined && !DROP_REQUEST.has(name)) headers[name] = value;
      }
      const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
      const { target, response: upstream } = await deps.agentClient.forward(userId, agentId, {
        method: request.method as (typeof METHODS)[number],
        path: `${path}${query}`,
        headers,
        body,
      });
      // a redirect only within the agent's own paths (docs/agents.md "Agent content and streams"); checked before any header is copied
      const location =
        upstream.headers.location === undefined
          ? undefined
          : proxiedLocation(upstream.headers.location, { path, prefix, gateway: target.baseUrl, platformOrigins: allowedOrigins });
      if (location === undefined && REDIRECT_STATUSES.has(upstream.statusCode)) {
        upstream.body.dump().catch(() => {});
        throw new AppError(
          'AGENT_REDIRECT_REFUSED',
          `The agent answered a redirect (${upstream.statusCode}) to a place outside its own paths; the platform does not pass it on`,
        );
      }
      reply.code(upstream.statusCode);
      for (const [name, value] of Object.entries(upstream.headers)) {
        if (value !== undefined && !dropResponseHeader(name)) reply.header(name, value);
      }
      if (location !== undefined) reply.header('location', location);
      reply.headers(CONTAINMENT_HEADERS);
      if (!isInert(upstream.headers['content-type'])) {
        reply.header('content-type', 'application/octet-stream');
        reply.header('content-disposition', 'attachment');
      }
      const stop = () => {
        if (!upstream.body.destroyed) upstream.body.destroy();
      };
      request.raw.once('close', stop);
      watch.onRevoked(() => {
        stop();
        reply.raw.destroy();
      });
      return reply.send(storingStreamedTurn(request, upstream, userId, target, path, askedAt));
    }

    /** The answer to send: a streamed chat completion is read on its way to store the turn. */
    function storingStreamedTurn(
      request: FastifyRequest,
      upstream: Dispatcher.ResponseData,
      userId: string,
      target: AgentTarget,
      path: string,
      askedAt: Date,
    ) {
      const chat = deps.chat;
      const streamed =
        request.method === 'POST' &&
        path === '/v1/chat/completions' &&
        upstream.statusCode === 200 &&
        String(upstream.headers['content-type'] ?? '').startsWith('text/event-stream');
      const question = chat && streamed ? streamedQuestion(request.body as Buffer | undefined) : undefined;
      if (!chat || question === undefined) return upstream.body;
      return readingAnswer(upstream.body, (answer) => {
        const turn = { agentId: target.agent.id, question, askedAt, answer, responseMs: Date.now() - askedAt.getTime() };
        chat
          .recordTurn(userId, turn)
          .catch((err: unknown) => request.log.warn({ err, agentId: target.agent.id }, 'streamed chat turn not stored'));
      });
    }

    /** Open proxied sockets per user, in this process. */
    const openSockets = new Map<string, number>();
    /** Takes one of the user's socket slots (429 when none is left); `free` gives it back, once. */
    function takeSocketSlot(userId: string): () => void {
      const n = openSockets.get(userId) ?? 0;
      if (n >= PROXY_SOCKET_LIMITS.socketsPerUser)
        throw tooManyRequests(`At most ${PROXY_SOCKET_LIMITS.socketsPerUser} agent WebSockets may be open at once`);
      openSockets.set(userId, n + 1);
      let freed = false;
      return () => {
        if (freed) return;
        freed = true;
        const left = (openSockets.get(userId) ?? 1) - 1;
        if (left > 0) openSockets.set(userId, left);
        else openSockets.delete(userId);
      };
    }

    /** What the preValidation of a socket route found: the agent, and the caller's watched credential. */
    type SocketGrant = { target: AgentTarget; watch: RevocationWatch };
    const GRANT = Symbol('agentSocketGrant');
    type GrantedRequest = FastifyRequest & { [GRANT]?: SocketGrant };

    /**
     * Before the upgrade: refuses cross-site cookie sockets, authenticates, takes a socket slot and
     * finds the agent. The slot and the watch last as long as the connection does.
     */
    async function grantSocket(request: FastifyRequest, agentId: string) {
      refuseCrossSiteSocket(request);
      const { userId, credential } = await caller(request);
      const free = takeSocketSlot(userId);
      const watch = deps.revoker.watch(userId, credential);
      const release = () => {
        free();
        watch.release();
      };
      whenClosed(request.raw.socket, release);
      try {
        (request as GrantedRequest)[GRANT] = { target: await deps.agentClient.targets.byId(userId, agentId), watch };
      } catch (err) {
        release();
        throw err;
      }
    }

    /** WebSocket pipe to the gateway's `/ws`, within PROXY_SOCKET_LIMITS; revoking the credential closes both with 1008. */
    function pipeSocket(client: WebSocket, request: FastifyRequest) {
      const { target, watch } = (request as GrantedRequest)[GRANT]!;
      const pipe = deps.agentClient.pipeSocket(client, target, PROXY_SOCKET_LIMITS);
      watch.onRevoked(() => pipe.close(1008, 'Credentials revoked'));
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
      // ws refuses a larger message as soon as its header arrives (1009), before buffering it
      if (!scope.hasDecorator('websocketServer'))
        await scope.register(fastifyWebsocket, { options: { maxPayload: PROXY_SOCKET_LIMITS.clientMessageBytes } });

      const idParams = z.object({ id: z.string().min(1).max(64) });
      // the whole /v1 API of the agent; the chat completions operation is documented on its own
      scope.route({
        method: [...METHODS],
        url: '/api/agents/:id/v1/*',
        schema: { hide: true },
        handler: (request, reply) => {
          const { id, '*': rest } = request.params as { id: string; '*': string };
          return forward(request, reply, id, `/v1/${rest}`, prefixOf(id));
        },
      });
      scope.post('/api/agents/:id/v1/chat/completions', {
        schema: {
          tags: ['chat'],
          summary: "Your agent's OpenAI-compatible chat completions, through the platform",
          description:
            "Proxies to the agent's gateway (every path under `/api/agents/{id}/v1/`, this one included, goes to the gateway's `/v1/…`; " +
            'streaming answers pass through as they are produced) with the gateway token added by the platform. Point the official `openai` ' +
            'client at `…/api/agents/{id}/v1` with one of your API keys, or send your session cookie. No `model`, or `model: "default"`, means the ' +
            "agent's own model (GET …/v1/models names it); any other model is passed on as it is. The answer and its status are the agent's " +
            "own (OpenAI format); the platform's own answers are 400 in OpenAI's error shape for a body nested deeper than " +
            `${CHAT_BODY_MAX_DEPTH} levels of arrays and objects, 401 without credentials, 404 for an agent that is not yours, 502 ` +
            '`AGENT_UNAVAILABLE` when the agent cannot be reached and 503 `NO_GATEWAY_TOKEN`. Every turn appears in ' +
            'GET /api/agents/{id}/messages: a streamed one (`stream: true`) is stored by the platform once the stream has ended (the last ' +
            'user message and the answer read from the stream as it passes), a non-streamed one is reported by the agent.',
          params: idParams,
          body: z.object({}).passthrough().describe('An OpenAI chat completions request, passed to the agent as it is'),
          security: [{ sessionCookie: [] }, { apiKey: [] }],
          response: {
            200: z.object({}).passthrough().describe("The agent's chat completion (JSON), or text/event-stream when `stream: true`"),
            400: openAiErrorSchema,
            401: errorSchema,
            404: errorSchema,
            502: errorSchema,
            503: errorSchema,
          },
        },
        // the body is passed through as bytes: the schema documents it, the agent validates it
        validatorCompiler: () => () => true,
        serializerCompiler: () => (data) => JSON.stringify(data),
        handler: (request, reply) => {
          const { id } = request.params as { id: string };
          return forward(request, reply, id, '/v1/chat/completions', prefixOf(id));
        },
      });

      scope.get('/api/agents/:id/v1/models', {
        schema: {
          tags: ['chat'],
          summary: "Your agent's model, as an OpenAI models list",
          description:
            'Answered by the platform (the agent is not called): the model the agent runs, then `default`, the alias a chat completion may ' +
            "send instead (what the `openai` client's `models.list()` reads). Same credentials and answers as the chat completions: 401 " +
            'without credentials, 404 for an agent that is not yours, 503 `NO_GATEWAY_TOKEN` before the agent has a gateway.',
          params: idParams,
          security: [{ sessionCookie: [] }, { apiKey: [] }],
          response: {
            200: z.object({
              object: z.literal('list'),
              data: z.array(z.object({ id: z.string(), object: z.literal('model'), created: z.number(), owned_by: z.string() })),
            }),
            401: errorSchema,
            404: errorSchema,
            503: errorSchema,
          },
        },
        handler: (request, reply) => {
          const { id } = request.params as { id: string };
          return forward(request, reply, id, '/v1/models', prefixOf(id));
        },
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
              "This is the `websocketUrl` agents report. Session cookie (from the platform's own pages only) or `Authorization: Bearer sk_…`. " +
              `Messages from the client over ${PROXY_SOCKET_LIMITS.clientMessageBytes / 1024} KiB close the socket with 1009; more than ` +
              `${PROXY_SOCKET_LIMITS.pendingBytes / 1024 / 1024} MiB sent before the agent's socket opens closes it with 1013; signing out or ` +
              `deleting the key it was opened with closes it with 1008. 429 when the user already has ${PROXY_SOCKET_LIMITS.socketsPerUser} open.`,
            params: idParams,
            security: [{ sessionCookie: [] }, { apiKey: [] }],
            response: { 401: errorSchema, 403: errorSchema, 404: errorSchema, 429: errorSchema, 503: errorSchema },
          },
          preValidation: (request) => grantSocket(request, (request.params as { id: string }).id),
        },
        pipeSocket,
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
          preValidation: (request) => grantSocket(request, agentFromHost(request)),
        },
        pipeSocket,
      );
      scope.route({
        method: [...METHODS],
        url: '/*',
        constraints: hostConstraint,
        schema: { hide: true },
        handler: (request, reply) => forward(request, reply, agentFromHost(request), request.url.split('?', 1)[0]!, ''),
      });
    });
  },
});
