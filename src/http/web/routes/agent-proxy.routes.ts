/**
 * The authenticated gateway proxy (docs/agents.md "Talk to your agent"): each agent's gateway is
 * reachable through the web app, by its owner only, and the platform adds the gateway token
 * itself, so the token never reaches a browser or a client.
 *
 * - HTTP: `/api/agents/:id/v1/*` → the gateway's `/v1/*` (the OpenAI-compatible API: point the
 *   official `openai` client at `…/api/agents/:id/v1` with one of your `sk_` keys). The platform
 *   answers `GET …/v1/models` itself (the agent's model), and a chat completion without a model or
 *   with `model: "default"` is sent as the agent's model.
 * - WebSocket: `/api/agents/:id/ws` → the gateway's `/ws` chat.
 * - One host per agent: a request whose Host is `<id>.<AGENTS_DOMAIN>` goes, whatever its path
 *   (except the platform's own `/api/…` routes), to that agent's gateway.
 *
 * Who: the account scope (the owner's session cookie, or `Authorization: Bearer sk_…` with one of
 * the owner's API keys), with the proxy's own 401 texts; anyone else's agent, or no agent, is 404
 * alike. What happens to the request and the answer, the stored turns of streamed chat completions
 * included, is the agents domain's proxy (`src/domains/agents/agent-client/agent-proxy.service.ts`);
 * this module keeps the schemas, the byte-for-byte body parsing, the refusal of cross-site cookie
 * sockets, and the reply plumbing.
 */
import fastifyWebsocket from '@fastify/websocket';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type WebSocket from 'ws';
import { z } from 'zod';
import { type AgentProxy, CHAT_BODY_MAX_DEPTH, PROXY_SOCKET_LIMITS } from '../../../domains/agents/index.ts';
import { forbidden } from '../../../lib/errors.ts';
import type { App } from '../../shared/base-app.ts';
import { KEY_LIMITS, tooDeepErrorSchema } from '../../shared/openai-wire.ts';
import { CROSS_SITE_MESSAGE } from '../../shared/origin-check.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';
import { type AccountRouteConfig, currentCaller } from '../../shared/session.ts';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

/** The account scope's 401 texts on every proxied route: either credential is accepted, and the answer says so. */
const config = {
  unauthorized: {
    invalidKey: 'Invalid API key',
    missing: 'Sign in, or send one of your API keys as `Authorization: Bearer sk_…`',
  },
} satisfies AccountRouteConfig;

export type AgentProxyRouteDeps = {
  /** the agents domain's proxy: every request and socket to an agent */
  proxy: AgentProxy;
  /** AGENTS_DOMAIN: `<id>.<AGENTS_DOMAIN>` is the agent's own host */
  agentsDomain: string;
  /** PUBLIC_URL and CSRF_ALLOWED_ORIGINS: the only origins whose pages may open a cookie WebSocket */
  allowedOrigins: readonly string[];
  /** ends the kept-alive connections to agents when the app closes */
  close: () => Promise<void>;
};

/** Where an agent's paths are on the platform's own host (its `<id>.<AGENTS_DOMAIN>` host mounts them at the root). */
const prefixOf = (agentId: string) => `/api/agents/${encodeURIComponent(agentId)}`;

/** A granted socket (the preValidation's `openSocket`), kept on the request for the handler that pipes it. */
const GRANT = Symbol('agentSocketGrant');
type GrantedRequest = FastifyRequest & { [GRANT]?: Awaited<ReturnType<AgentProxy['openSocket']>> };

export const agentProxyRoutes = (deps: AgentProxyRouteDeps): RouteModule<'account'> => ({
  prefix: '',
  account: async (app: App) => {
    app.addHook('onClose', async () => {
      await deps.close();
    });
    const allowedOrigins = new Set(deps.allowedOrigins.map((o) => new URL(o).origin));
    const hostPattern = new RegExp(
      `^([a-z0-9][a-z0-9-]{2,62})\\.${deps.agentsDomain.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?::\\d+)?$`,
      'i',
    );

    async function forward(request: FastifyRequest, reply: FastifyReply, agentId: string, path: string, prefix: string) {
      const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
      const answer = await deps.proxy.forward(
        currentCaller(request),
        agentId,
        {
          method: request.method as (typeof METHODS)[number],
          path,
          query,
          prefix,
          headers: request.headers,
          body: (request.body as Buffer | undefined) ?? null,
          log: request.log,
        },
        { request: request.raw, response: reply.raw },
      );
      return reply.code(answer.status).headers(answer.headers).send(answer.body);
    }

    /**
     * Before the upgrade: a cookie-authenticated WebSocket from another site's page would act as the
     * owner (CSWSH), so it is refused; then the proxy takes a socket slot and finds the agent, for
     * as long as the connection lasts.
     */
    async function grantSocket(request: FastifyRequest, agentId: string) {
      const caller = currentCaller(request);
      const origin = request.headers.origin;
      if ('session' in caller.credential && typeof origin === 'string' && !allowedOrigins.has(origin)) throw forbidden(CROSS_SITE_MESSAGE);
      (request as GrantedRequest)[GRANT] = await deps.proxy.openSocket(caller, agentId, request.raw.socket);
    }
    const pipeSocket = (client: WebSocket, request: object) => (request as GrantedRequest)[GRANT]!.pipe(client);
    /**
     * An upgrade the account scope refused (401) was answered before the websocket plugin's own
     * hook saw it, so the plugin does not close its connection after the answer: closed here.
     */
    const closeRefusedUpgrade = (
      request: Pick<FastifyRequest, 'ws' | 'headers' | 'raw'>,
      _reply: unknown,
      done: HookHandlerDoneFunction,
    ) => {
      if (!request.ws && request.headers.upgrade !== undefined) request.raw.socket.destroy();
      done();
    };

    await app.register(async (scope) => {
      scope.setErrorHandler(KEY_LIMITS.errorHandler); // a key's rate limit and budget in OpenAI's shape on the agent's /v1 paths
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
        config,
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
            `user message and the answer read from the stream as it passes), a non-streamed one is reported by the agent. ${KEY_LIMITS.description}`,
          params: idParams,
          body: z.object({}).passthrough().describe('An OpenAI chat completions request, passed to the agent as it is'),
          response: {
            200: z.object({}).passthrough().describe("The agent's chat completion (JSON), or text/event-stream when `stream: true`"),
            400: tooDeepErrorSchema,
            ...KEY_LIMITS.responses,
            ...errorResponses(401, 404, 502, 503),
          },
        },
        config,
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
          response: {
            200: z.object({
              object: z.literal('list'),
              data: z.array(z.object({ id: z.string(), object: z.literal('model'), created: z.number(), owned_by: z.string() })),
            }),
            ...errorResponses(401, 404, 503),
          },
        },
        config,
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
            response: { ...errorResponses(401, 402, 403, 404, 429, 503) },
          },
          config,
          preValidation: (request) => grantSocket(request, (request.params as { id: string }).id),
          onResponse: closeRefusedUpgrade,
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
          config,
          preValidation: (request) => grantSocket(request, agentFromHost(request)),
          onResponse: closeRefusedUpgrade,
        },
        pipeSocket,
      );
      scope.route({
        method: [...METHODS],
        url: '/*',
        constraints: hostConstraint,
        schema: { hide: true },
        config,
        handler: (request, reply) => forward(request, reply, agentFromHost(request), request.url.split('?', 1)[0]!, ''),
      });
    });
  },
});
