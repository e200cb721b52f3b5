/**
 * The one client of an agent's gateway (docs/architecture.md "Reaching an agent"): every call the
 * platform makes to an agent goes through here, so URLs (`/v1/…`, `/ws`, `/healthz`), the gateway
 * token, timeouts and the mapping of failures to the error catalogue live in one place.
 *
 * - `forward`: any HTTP request, streamed both ways (the authenticated gateway proxy), with one
 *   fresh look-up when a cached address no longer answers (the agent restarted elsewhere).
 * - `pipeSocket`: a caller's WebSocket piped to the gateway's `/ws`, within the caller's limits
 *   (./socket-pipe.client.ts).
 * - `wsChat`: one chat frame over `/ws` and its reply (§4.8 gateway chat).
 * - `streamCompletion`: a streamed `POST /v1/chat/completions` read as text (§4.18 REST chat).
 * - `chatCompletion` (the payments `agent` plugin) and `heartbeat` (`POST /v1/heartbeat`, the heartbeat worker).
 * - `probeHealthz` (./health-probe.client.ts): `GET /healthz` of a gateway the driver reports (container health).
 * Targets (base URL and decrypted token, cached briefly) come from `targets.service.ts`.
 */
import { connect as netConnect } from 'node:net';
import type { Agent, buildConnector, Dispatcher } from 'undici';
import WebSocket from 'ws';
import { KEY_ID_HEADER, LIMITS } from '../../../config/limits.ts';
import { AppError, isAppError } from '../../../lib/errors.ts';
import { undici, undiciIfLoaded } from '../../../lib/undici.ts';
import { type AgentTrafficRecorder, noTraffic } from '../idle/agent-traffic.service.ts';
import { openClawModel, withOpenClawModel } from './agent-model.rules.ts';
import { createCompletionText } from './completion-text.rules.ts';
import { type RefusalDetails, relayedRefusal } from './relayed-refusal.rules.ts';
import { pipeSocket, type SocketPipeLimits } from './socket-pipe.client.ts';
import type { AgentTarget, AgentTargets } from './targets.service.ts';

export type ChatMessage = { role: 'system' | 'user' | 'assistant'; content: string };
export type ForwardRequest = {
  method: Dispatcher.HttpMethod;
  /** path and query on the gateway, e.g. `/v1/models?x=1` */
  path: string;
  /** the headers to send (the caller's policy already applied); the gateway token is added here */
  headers: Record<string, string | string[]>;
  body: Buffer | null;
};

const agentFailed = (detail: string) => new AppError('AGENT_UNAVAILABLE', `The agent did not answer: ${detail}`);

/** What to do next, after a failure that may be the agent's process gone: the platform checks it at once (docs/watchdog.md "Checks on demand"). */
const NEXT_STEP = 'the platform is checking it now and restarts it if its process stopped: try again in a few seconds, or restart it';

/** `headers` without `content-length` (any case): for a body this client changed. */
const withoutContentLength = (headers: ForwardRequest['headers']) =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => name.toLowerCase() !== 'content-length'));
const wsUrl = (t: AgentTarget) => `${t.baseUrl.replace(/^http/, 'ws')}/ws`;
const bearer = (t: AgentTarget) => `Bearer ${t.token}`;
export type AgentClientDeps = {
  targets: AgentTargets;
  /** how long a forwarded request may wait for the agent's headers / between body chunks */
  forwardTimeoutMs?: number;
  /** §8 chat WebSocket timeout (30 s) */
  wsTimeoutMs?: number;
  /** how long a REST chat may wait for the agent's first byte and between chunks */
  restTimeoutMs?: number;
  /**
   * The Unix socket serving an agent origin in this process (the local driver's sandboxed agents,
   * agent-loopback.service.ts): forwarded requests connect to it directly instead of through the platform's
   * own TCP forwarder, one relay less per request
   */
  localSocket?: (origin: string) => string | undefined;
  /**
   * What the agents run (the local driver's AGENT_RUNTIME; `builtin` elsewhere). An `openclaw`
   * agent's `/v1/chat/completions` takes OpenClaw's agent targets as `model`, so the agent's own
   * model (and the `default` alias) is sent as `openclaw/default` (agent-model.rules.ts)
   */
  runtime?: 'builtin' | 'openclaw';
  /**
   * Told when an agent could not be reached (AGENT_UNAVAILABLE: no connection, a broken or refused
   * one, no answer in time): the platform has the watchdog check it at once, rate-limited per agent,
   * rather than at its next probe.
   */
  onUnreachable?: (agentId: string) => void;
  /** idle agents (docs/agents.md "Idle agents sleep"): an agent is busy while a call to it is open, never idle mid-answer */
  traffic?: AgentTrafficRecorder;
};

/** undici's connector (undici calls this, so it is loaded by then), except for an origin `localSocket` names: a Unix socket connection to it. */
function connectorFor(localSocket: ((origin: string) => string | undefined) | undefined): buildConnector.connector | undefined {
  if (!localSocket) return undefined;
  let tcp: buildConnector.connector | undefined;
  return (opts, callback) => {
    const path = opts.protocol === 'http:' ? localSocket(`http://${opts.hostname}:${opts.port}`) : undefined;
    if (!path) return (tcp ??= undiciIfLoaded()!.buildConnector({}))(opts, callback);
    const socket = netConnect({ path });
    const failed = (err: Error) => callback(err, null);
    socket.once('error', failed);
    socket.once('connect', () => {
      socket.off('error', failed);
      callback(null, socket);
    });
  };
}

export function createAgentClient(deps: AgentClientDeps) {
  const { targets } = deps;
  const traffic = deps.traffic ?? noTraffic;
  /** Runs `call` with the agent counted busy until it settles. */
  const whileBusy = <T>(agentId: string, call: () => Promise<T>): Promise<T> => {
    const done = traffic.busy(agentId);
    return call().finally(done);
  };
  const forwardTimeoutMs = deps.forwardTimeoutMs ?? 300_000;
  const wsTimeoutMs = deps.wsTimeoutMs ?? LIMITS.chatWebSocketTimeoutMs;
  const restTimeoutMs = deps.restTimeoutMs ?? 120_000;
  // kept-alive connections for forwarded requests, made on first use (close() ends them)
  let dispatcher: Agent | undefined;
  const connect = connectorFor(deps.localSocket);
  const openClaw = deps.runtime === 'openclaw';
  /** The names that mean an agent's own model: the `default` alias is added by openClawModel. */
  const ownModels = (t: AgentTarget) => [t.agent.model];
  const isChatCompletions = (req: ForwardRequest) => req.method === 'POST' && req.path.split('?')[0] === '/v1/chat/completions';
  const tellUnreachable = (agentId: string) => {
    try {
      deps.onUnreachable?.(agentId);
    } catch {
      /* the check is best effort; the caller gets the refusal either way */
    }
  };
  /** AGENT_UNAVAILABLE for an agent that could not be reached, after telling onUnreachable. */
  const unreachable = (agentId: string, message: string) => {
    tellUnreachable(agentId);
    return new AppError('AGENT_UNAVAILABLE', message);
  };

  /** `streamCompletion`'s request and reading. */
  async function streamFrom(
    t: AgentTarget,
    input: { messages: ChatMessage[]; model?: string | undefined },
    onDelta: (text: string) => void,
    signal?: AbortSignal,
    again = true,
  ): Promise<string> {
    let res: Response;
    const abort = AbortSignal.any([AbortSignal.timeout(restTimeoutMs), ...(signal ? [signal] : [])]);
    const model = openClaw ? openClawModel(input.model, ownModels(t)) : input.model;
    try {
      res = await fetch(`${t.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: bearer(t), 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ messages: input.messages, stream: true, ...(model ? { model } : {}) }),
        signal: abort,
      });
    } catch (err) {
      if (signal?.aborted) throw agentFailed('the request was cancelled');
      // its target may be stale (the agent went to sleep, or moved): once more after a fresh look-up, which wakes it
      const timedOut = (err as Error).name === 'TimeoutError';
      if (again && !timedOut)
        return streamFrom(await targets.byId(t.agent.user_id, t.agent.id, { fresh: true }), input, onDelta, signal, false);
      throw unreachable(t.agent.id, `The agent did not answer: ${timedOut ? 'timed out' : 'unreachable'}; ${NEXT_STEP}`);
    }
    if (!res.ok || !res.body) {
      let detail = 'no explanation';
      let refusal: AppError | undefined;
      try {
        const body = (await res.json()) as { error?: ({ message?: unknown } & RefusalDetails) | string };
        const e = body.error;
        const m = typeof e === 'string' ? e : e?.message;
        if (typeof m === 'string') detail = m.slice(0, 500);
        // the runtime passes the AI gateway's 4xx on with its status and OpenAI body (`error.code`)
        if (res.status >= 400 && res.status < 500 && e && typeof e === 'object')
          refusal = relayedRefusal(detail, { retryAfter: res.headers.get('retry-after') ?? undefined, ...e });
      } catch {
        // not JSON: the status says enough
      }
      if (refusal) throw refusal;
      throw new AppError('AGENT_UNAVAILABLE', `The agent answered ${res.status}: ${detail}`);
    }
    const reader = createCompletionText();
    const read = (pieces: string[]) => {
      for (const piece of pieces) onDelta(piece);
      if (reader.error) throw agentFailed(reader.error);
    };
    try {
      for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) read(reader.push(bytes));
      read(reader.end());
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw agentFailed((err as Error).name === 'TimeoutError' ? 'timed out' : 'the stream broke off');
    }
    return reader.text;
  }

  return {
    targets,
    /** Counts the agent busy until the returned function is called (the proxy's forwarded answer). */
    busy: (agentId: string) => traffic.busy(agentId),

    /**
     * Sends `req` to the user's agent `agentId` and returns the answer unread. A failure to reach a
     * cached address looks the agent up again, once; a second failure is 502 `AGENT_UNAVAILABLE`.
     * 404 and 503 `NO_GATEWAY_TOKEN` come from the look-up.
     */
    async forward(
      userId: string,
      agentId: string,
      req: ForwardRequest,
    ): Promise<{ target: AgentTarget; response: Dispatcher.ResponseData }> {
      const u = undiciIfLoaded() ?? (await undici());
      dispatcher ??= new u.Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1, ...(connect ? { connect } : {}) });
      const via = dispatcher;
      const send = async (target: AgentTarget) => {
        const body = openClaw && isChatCompletions(req) ? withOpenClawModel(req.body, ownModels(target)) : req.body;
        // a body of another length than the caller's (the model was renamed): undici sets its own
        const headers = body === req.body ? req.headers : withoutContentLength(req.headers);
        return {
          target,
          response: await u.request(`${target.baseUrl}${req.path}`, {
            method: req.method,
            headers: { ...headers, authorization: bearer(target) },
            body: body && body.length > 0 ? body : null,
            dispatcher: via,
            headersTimeout: forwardTimeoutMs,
            bodyTimeout: forwardTimeoutMs,
          }),
        };
      };
      try {
        return await send(await targets.byId(userId, agentId));
      } catch (err) {
        if (isAppError(err)) throw err;
        // a cached address may be stale (the agent restarted elsewhere, or went to sleep): look it up again, once
        targets.forget(userId, agentId);
        try {
          return await send(await targets.byId(userId, agentId, { fresh: true }));
        } catch (retryErr) {
          if (isAppError(retryErr)) throw retryErr;
          throw unreachable(agentId, `The agent could not be reached; ${NEXT_STEP}`);
        }
      }
    },

    /**
     * Pipes `client` to a new WebSocket on the agent's `/ws` within `limits` (./socket-pipe.client.ts),
     * with `headers` on its upgrade (the caller's key, for the agent's model calls); `close` ends
     * both (the caller's revocation).
     */
    pipeSocket(client: WebSocket, target: AgentTarget, limits: SocketPipeLimits, headers?: Record<string, string>) {
      // busy while the caller's socket is open
      client.once('close', traffic.busy(target.agent.id));
      return pipeSocket(
        client,
        { url: wsUrl(target), authorization: bearer(target), headers, onUnreachable: () => tellUnreachable(target.agent.id) },
        limits,
      );
    },

    /** §4.8: one WebSocket, one chat frame, the first reply or error frame, then close. */
    wsChat(t: AgentTarget, message: string, sessionKey: string): Promise<string> {
      return whileBusy(
        t.agent.id,
        () =>
          new Promise<string>((resolve, reject) => {
            const socket = new WebSocket(wsUrl(t), { headers: { authorization: bearer(t) }, handshakeTimeout: wsTimeoutMs });
            let settled = false;
            const finish = (err: AppError | undefined, reply?: string) => {
              if (settled) return;
              settled = true;
              clearTimeout(timer);
              socket.removeAllListeners('message');
              socket.on('error', () => {});
              socket.close();
              if (err) reject(err);
              else resolve(reply!);
            };
            const timer = setTimeout(
              () => finish(new AppError('AGENT_TIMEOUT', `The agent did not reply within ${Math.round(wsTimeoutMs / 1000)} seconds`)),
              wsTimeoutMs,
            );
            socket.on('open', () => socket.send(JSON.stringify({ type: 'chat', content: message, sessionKey })));
            socket.on('message', (raw: Buffer) => {
              let frame: { type?: unknown; content?: unknown; error?: unknown } & RefusalDetails;
              try {
                frame = JSON.parse(raw.toString('utf8'));
              } catch {
                return;
              }
              if (frame.type === 'reply' && typeof frame.content === 'string') finish(undefined, frame.content);
              else if (frame.type === 'error') {
                // the runtime's error frame carries the refusal's code (and allowed models), not its status
                const message = typeof frame.error === 'string' ? frame.error : 'The agent answered with an error';
                finish(relayedRefusal(message, frame) ?? new AppError('AGENT_ERROR', message.slice(0, 500)));
              }
            });
            socket.on('unexpected-response', (_req, res) => {
              res.resume();
              finish(unreachable(t.agent.id, `The agent's gateway refused the connection (${res.statusCode}); ${NEXT_STEP}`));
            });
            socket.on('error', (err) => finish(unreachable(t.agent.id, `Could not reach the agent (${err.message}); ${NEXT_STEP}`)));
            socket.on('close', () => {
              if (!settled) finish(unreachable(t.agent.id, `The agent closed the connection without replying; ${NEXT_STEP}`));
            });
          }),
      );
    },

    /**
     * Streams a completion from the agent, calling `onDelta` with each piece of text, and returns
     * the whole text. SSE per the OpenAI wire format: `data: {json}` events, `data: [DONE]`.
     */
    async streamCompletion(
      t: AgentTarget,
      input: { messages: ChatMessage[]; model?: string | undefined },
      onDelta: (text: string) => void,
      signal?: AbortSignal,
    ): Promise<string> {
      return whileBusy(t.agent.id, () => streamFrom(t, input, onDelta, signal));
    },

    /**
     * A non-streamed completion: the answer's text. A refusal the agent passes on (its budget, a
     * rate limit: RELAYED_REFUSALS) throws as the platform's error with its status and sentence;
     * any other error status, an answer without content or no answer within `timeoutMs` throws a
     * plain error. `keyId`: the API key the call is made with, named to the agent (KEY_ID_HEADER)
     * as the proxy does, so its model calls are held against that key's budget.
     */
    async chatCompletion(
      t: AgentTarget,
      messages: { role: string; content: string }[],
      options: { signal: AbortSignal; timeoutMs: number; keyId?: string | undefined },
    ): Promise<string> {
      const res = await fetch(`${t.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: {
          authorization: bearer(t),
          'content-type': 'application/json',
          ...(options.keyId ? { [KEY_ID_HEADER]: options.keyId } : {}),
        },
        body: JSON.stringify({ messages, stream: false }),
        signal: AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs)]),
      });
      if (!res.ok) {
        let refusal: AppError | undefined;
        if (res.status >= 400 && res.status < 500) {
          const body = (await res.json().catch(() => undefined)) as
            | { error?: ({ message?: unknown } & RefusalDetails) | string }
            | undefined;
          const e = body?.error;
          if (e && typeof e === 'object' && typeof e.message === 'string')
            refusal = relayedRefusal(e.message, { retryAfter: res.headers.get('retry-after') ?? undefined, ...e });
        }
        await res.body?.cancel().catch(() => {});
        if (refusal) throw refusal;
        throw new Error(`agent gateway answered ${res.status}`);
      }
      const body = (await res.json()) as { choices?: { message?: { content?: unknown } }[] };
      const content = body.choices?.[0]?.message?.content;
      if (typeof content !== 'string') throw new Error('agent gateway answered without content');
      return content;
    },

    /**
     * Wakes the user's agent for one scheduled heartbeat (§4.12): POST /v1/heartbeat with its run
     * id; the outcome as a value, never thrown, in the words the heartbeat history shows.
     */
    async heartbeat(
      userId: string,
      agentId: string,
      runId: string,
      timeoutMs: number,
    ): Promise<{ ok: true } | { ok: false; error: string }> {
      let t: AgentTarget;
      try {
        t = await targets.byId(userId, agentId, { fresh: true });
      } catch (err) {
        return { ok: false, error: isAppError(err) ? err.message : 'the agent could not be looked up' };
      }
      let res: Response;
      try {
        res = await fetch(`${t.baseUrl}/v1/heartbeat`, {
          method: 'POST',
          headers: { authorization: bearer(t), 'content-type': 'application/json' },
          body: JSON.stringify({ runId }),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (err) {
        tellUnreachable(agentId);
        return {
          ok: false,
          error: (err as Error).name === 'TimeoutError' ? 'the agent did not answer in time' : 'the agent could not be reached',
        };
      }
      const body = (await res.json().catch(() => undefined)) as { ok?: boolean; error?: { message?: string } | string } | undefined;
      if (res.ok && body?.ok === true) return { ok: true };
      const message = typeof body?.error === 'string' ? body.error : body?.error?.message;
      return { ok: false, error: `the agent answered ${res.status}${message ? `: ${message.slice(0, 300)}` : ''}` };
    },

    /** Ends the kept-alive connections of `forward` (a later call opens new ones). */
    async close() {
      const d = dispatcher;
      dispatcher = undefined;
      await d?.close();
    },
  };
}

export type AgentClient = ReturnType<typeof createAgentClient>;
