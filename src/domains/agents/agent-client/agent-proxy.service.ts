/**
 * The authenticated gateway proxy (docs/agents.md "Talk to your agent"): one proxied HTTP
 * exchange or WebSocket with the caller's agent, from the caller to the agent's answer. The route
 * (src/http/web/routes/agent-proxy.routes.ts) authenticates through the account scope and plumbs
 * the reply; everything about the agent happens here, one way down: the agent's model on `/v1`
 * (./agent-model.rules.ts), which headers pass (./proxy-headers.rules.ts), the request through the
 * agent client (./agent.client.ts, which adds the gateway token), the socket slots of a user, the
 * end of what is open when its credential is revoked, and the turn a streamed chat completion
 * stores (./proxied-turn.rules.ts, into the agent's messages like every other way in).
 *
 * An agent is not trusted with the platform's origin (docs/agents.md "Agent content and streams"):
 * its answers are sandboxed and never served as a page (docs/security.md N6), its redirects stay
 * within its own paths (N26), its WebSocket is bounded (N10), and whatever is open ends when the
 * session or key it was opened with is revoked (N12).
 */
import type { Readable } from 'node:stream';
import type WebSocket from 'ws';
import { DEFAULT_GATEWAY_LIMITS, KEY_ID_HEADER } from '../../../config/limits.ts';
import { AppError, notFound, tooManyRequests } from '../../../lib/errors.ts';
import type { StreamCredential, StreamRevoker } from '../../../lib/eviction-bus.ts';
import { createHoldCounts } from '../../../lib/hold-counts.ts';
import type { AgentMessages } from '../agent-messages.service.ts';
import type { AgentClient, ForwardRequest } from './agent.client.ts';
import { agentModelList, tooDeepChatBody, withAgentModel } from './agent-model.rules.ts';
import { readingAnswer, STORED_ANSWER_MAX_CHARS, streamedQuestion } from './proxied-turn.rules.ts';
import {
  CONTAINMENT_HEADERS,
  DROP_REQUEST,
  dropResponseHeader,
  isInert,
  proxiedLocation,
  REDIRECT_STATUSES,
} from './proxy-headers.rules.ts';

/** Bounds of the proxied WebSocket (docs/security.md N10), for each web process. */
export const PROXY_SOCKET_LIMITS = {
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

/**
 * Who calls: the account scope's caller, with the credential whose revocation ends what it opened,
 * and the API key's limits when it came with one (docs/payments.md "API keys").
 */
export type ProxyCaller = {
  userId: string;
  credential: StreamCredential;
  key?: { id: string; agentIds: readonly string[] | null; monthlyBudgetUsd: number | null } | null | undefined;
};

/** One request for the agent, as the caller sent it. */
export type ProxiedRequest = {
  method: ForwardRequest['method'];
  /** the agent's path asked for (`/v1/…`), without the query */
  path: string;
  /** the query with its `?`, or '' */
  query: string;
  /** where the agent's paths are on the platform: `/api/agents/<id>`, or '' on its own `<id>.<AGENTS_DOMAIN>` host */
  prefix: string;
  headers: Record<string, string | string[] | undefined>;
  /** the body as bytes, untouched */
  body: Buffer | null;
  /** where a turn that could not be stored is told */
  log: { warn(fields: object, message: string): void };
};

/** Something that closes once: Node's request, response or socket. */
type Closable = { destroyed: boolean; once(event: 'close', fn: () => void): unknown };

/** The caller's connection, as Node's http gives it (the route passes `request.raw` and `reply.raw`). */
export type CallerConnection = {
  /** closes when the caller leaves: the agent's answer stops being read */
  request: Closable;
  /** closes when the answer is done: the credential stops being watched; destroyed when it is revoked */
  response: Closable & { destroy(): unknown };
};

/** What to answer: the status, the headers to set, and a JSON value (the platform's own answers) or the agent's bytes. */
export type ProxiedAnswer = { status: number; headers: Record<string, string | string[]>; body: Readable | object };

export type AgentProxyDeps = {
  /** reaches the agent: look-ups, forwarded requests and piped WebSockets */
  agentClient: Pick<AgentClient, 'targets' | 'forward' | 'pipeSocket' | 'busy'>;
  /** ends what is open when the session or key it was opened with is revoked */
  revoker: Pick<StreamRevoker, 'watch'>;
  /** the platform's own origins (PUBLIC_URL and CSRF_ALLOWED_ORIGINS): an agent's redirect may name them only under its prefix */
  platformOrigins: readonly string[];
  /** where a streamed chat turn is stored (the agent's messages, as every other way in stores them) */
  messages: Pick<AgentMessages, 'recordTurn'>;
  /**
   * Rejects with 402 KEY_BUDGET_EXCEEDED when the key's month's model cost and calls in flight
   * reached its budget (the AI layer's key budgets): asked before a POST or a socket of a key
   * with a budget reaches the agent, so a spent key is refused whatever runtime the agent runs.
   */
  keyBudget?: (userId: string, keyId: string) => Promise<void>;
};

/** Runs `fn` when `target` closes, or now when it already has (the client left while we awaited). */
const whenClosed = (target: Closable, fn: () => void) => {
  if (target.destroyed) fn();
  else target.once('close', fn);
};

export function createAgentProxy(deps: AgentProxyDeps) {
  const { agentClient, revoker } = deps;
  const platformOrigins: ReadonlySet<string> = new Set(deps.platformOrigins.map((o) => new URL(o).origin));

  /**
   * A key limited to some agents reaches only those: any other is 404, as an agent that is not the
   * caller's (docs/payments.md "API keys"). Then, for what may spend (a POST, a socket), a key's
   * spent budget is 402 before the agent is called.
   */
  async function mayReach(caller: ProxyCaller, agentId: string, spends: boolean) {
    const key = caller.key;
    if (!key) return;
    if (key.agentIds && !key.agentIds.includes(agentId)) throw notFound('Agent not found');
    if (spends && key.monthlyBudgetUsd !== null && deps.keyBudget) await deps.keyBudget(caller.userId, key.id);
  }

  /** The agent's model (its record's, docs/agents.md "Model"), and when the agent was made (404 when not the caller's). */
  async function agentModel(userId: string, agentId: string) {
    const { agent } = await agentClient.targets.byId(userId, agentId);
    return { model: agent.model, createdAt: new Date(agent.created_at) };
  }

  /** Open proxied sockets per user, in this process. */
  const openSockets = createHoldCounts();
  /** Takes one of the user's socket slots (429 when none is left); `free` gives it back, once. */
  function takeSocketSlot(userId: string): () => void {
    if (openSockets.count(userId) >= PROXY_SOCKET_LIMITS.socketsPerUser)
      throw tooManyRequests(`At most ${PROXY_SOCKET_LIMITS.socketsPerUser} agent WebSockets may be open at once`);
    return openSockets.hold(userId);
  }

  /** The answer's body: a streamed chat completion is read on its way to store the turn. */
  function storingStreamedTurn(caller: ProxyCaller, req: ProxiedRequest, agentId: string, upstream: ForwardedAnswer, askedAt: Date) {
    const streamed =
      req.method === 'POST' &&
      req.path === '/v1/chat/completions' &&
      upstream.statusCode === 200 &&
      String(upstream.headers['content-type'] ?? '').startsWith('text/event-stream');
    const question = streamed ? streamedQuestion(req.body ?? undefined) : undefined;
    if (question === undefined) return upstream.body;
    // the answer is read up to what the history keeps; the question is cut the same
    return readingAnswer(upstream.body, (answer) => {
      const turn = {
        agentId,
        question: question.slice(0, STORED_ANSWER_MAX_CHARS),
        askedAt,
        answer,
        responseMs: Date.now() - askedAt.getTime(),
      };
      deps.messages
        .recordTurn(caller.userId, turn)
        .catch((err: unknown) => req.log.warn({ err, agentId }, 'streamed chat turn not stored'));
    });
  }

  return {
    /**
     * One HTTP request to the caller's agent `agentId`. The platform answers `GET /v1/models`
     * itself (the agent's model); a chat completion without a model, or with `default`, goes as
     * the agent's model, and one nested too deep is refused in OpenAI's shape. Anything else goes
     * to the agent with the caller's credentials, cookies and hop-by-hop headers dropped, and its
     * answer comes back contained: a redirect only within the agent's own paths, no header that
     * sets policy for the platform's origin, anything a browser would run as a download. The
     * answer is streamed; it ends when the caller leaves or the credential is revoked. A key limited
     * to other agents gets 404, and a key is named to the agent (KEY_ID_HEADER) so the model calls
     * it causes are charged to it (docs/payments.md "API keys").
     */
    async forward(caller: ProxyCaller, agentId: string, req: ProxiedRequest, connection: CallerConnection): Promise<ProxiedAnswer> {
      const askedAt = new Date();
      await mayReach(caller, agentId, req.method === 'POST');
      if (req.method === 'GET' && req.path === '/v1/models') {
        const { model, createdAt } = await agentModel(caller.userId, agentId);
        return { status: 200, headers: CONTAINMENT_HEADERS, body: agentModelList(model, createdAt) };
      }
      let body = req.body;
      if (req.method === 'POST' && req.path === '/v1/chat/completions') {
        const { model } = await agentModel(caller.userId, agentId);
        // before re-serialising it (withAgentModel): a body thousands of levels deep would overflow the stack
        const tooDeep = tooDeepChatBody(body);
        if (tooDeep) return { status: 400, headers: CONTAINMENT_HEADERS, body: tooDeep };
        body = withAgentModel(body, model);
      }
      // a streamed answer ends with its credential; watched from here so a revocation meanwhile counts
      const watch = revoker.watch(caller.userId, caller.credential);
      whenClosed(connection.response, watch.release);
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined && !DROP_REQUEST.has(name)) headers[name] = value;
      }
      // the key the request came with, for the agent's model call (the runtime passes it on, the gateway charges it)
      if (caller.key) headers[KEY_ID_HEADER] = caller.key.id;
      const { target, response: upstream } = await agentClient.forward(caller.userId, agentId, {
        method: req.method,
        path: `${req.path}${req.query}`,
        headers,
        body,
      });
      // the agent is busy (never idle: docs/agents.md "Idle agents sleep") until the answer is sent
      whenClosed(connection.response, agentClient.busy(target.agent.id));
      // a redirect only within the agent's own paths (docs/agents.md "Agent content and streams"); checked before any header is copied
      const location =
        upstream.headers.location === undefined
          ? undefined
          : proxiedLocation(upstream.headers.location, { path: req.path, prefix: req.prefix, gateway: target.baseUrl, platformOrigins });
      if (location === undefined && REDIRECT_STATUSES.has(upstream.statusCode)) {
        upstream.body.dump().catch(() => {});
        throw new AppError(
          'AGENT_REDIRECT_REFUSED',
          `The agent answered a redirect (${upstream.statusCode}) to a place outside its own paths; the platform does not pass it on`,
        );
      }
      const answerHeaders: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(upstream.headers)) {
        if (value !== undefined && !dropResponseHeader(name)) answerHeaders[name] = value;
      }
      if (location !== undefined) answerHeaders.location = location;
      Object.assign(answerHeaders, CONTAINMENT_HEADERS);
      if (!isInert(upstream.headers['content-type'])) {
        answerHeaders['content-type'] = 'application/octet-stream';
        answerHeaders['content-disposition'] = 'attachment';
      }
      const stop = () => {
        if (!upstream.body.destroyed) upstream.body.destroy();
      };
      connection.request.once('close', stop);
      watch.onRevoked(() => {
        stop();
        connection.response.destroy();
      });
      return {
        status: upstream.statusCode,
        headers: answerHeaders,
        body: storingStreamedTurn(caller, req, target.agent.id, upstream, askedAt),
      };
    },

    /**
     * Before a WebSocket to the caller's agent is accepted: takes one of the user's socket slots
     * (429 when all are taken), watches the credential and finds the agent (404 when not the
     * caller's, or not one a limited key reaches; 402 for a key whose budget is spent). The slot and
     * the watch last as long as `socket` (the caller's connection) does.
     * `pipe` then joins the accepted WebSocket to the agent's `/ws`, within PROXY_SOCKET_LIMITS;
     * revoking the credential closes both with 1008.
     */
    async openSocket(caller: ProxyCaller, agentId: string, socket: Closable): Promise<{ pipe(client: WebSocket): void }> {
      const free = takeSocketSlot(caller.userId);
      const watch = revoker.watch(caller.userId, caller.credential);
      const release = () => {
        free();
        watch.release();
      };
      whenClosed(socket, release);
      let target: Awaited<ReturnType<AgentClient['targets']['byId']>>;
      try {
        await mayReach(caller, agentId, true);
        // read afresh, not from the 2 s cache: a socket lives long, and an agent gone to sleep meanwhile is woken here
        target = await agentClient.targets.byId(caller.userId, agentId, { fresh: true });
      } catch (err) {
        release();
        throw err;
      }
      return {
        pipe(client) {
          const pipe = agentClient.pipeSocket(
            client,
            target,
            PROXY_SOCKET_LIMITS,
            caller.key ? { [KEY_ID_HEADER]: caller.key.id } : undefined,
          );
          watch.onRevoked(() => pipe.close(1008, 'Credentials revoked'));
        },
      };
    },
  };
}

type ForwardedAnswer = Awaited<ReturnType<AgentClient['forward']>>['response'];

export type AgentProxy = ReturnType<typeof createAgentProxy>;
