/**
 * The built-in runtime's WebSocket chat (GET /ws on the agent's gateway): `{type:'chat', content}` →
 * `{type:'reply', content}`, the socket keeping the conversation. It shares the gateway's model
 * call, its concurrency slots and its counters (gateway.ts hands them over). The `ws` library is
 * loaded by the first upgrade, not at start: with what it requires (tls, https, zlib) it is ~8 MB
 * of an idle agent's memory, and most agents are only probed.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import { type GatewayLimits, KEY_ID_HEADER, LIMITS } from '../config/limits.ts';
import type { GatewayOptions } from './gateway.ts';
import type { createLimiter } from './gateway-limits.ts';
import { namedKey, type UpstreamResponse } from './model-client.ts';
import { ModelRefusal } from './openai-errors.ts';
import { withSystemPrompt } from './persona.ts';
import type { RuntimeLogger } from './runtime-log.ts';

type ChatMessage = { role: string; content: unknown };

export type WebSocketChatContext = {
  options: Pick<GatewayOptions, 'model' | 'systemPrompt' | 'reportTurn'>;
  limits: GatewayLimits;
  modelSlots: ReturnType<typeof createLimiter>;
  /** one non-streaming completion from the configured provider, charged to `keyId` when the socket was opened with a key */
  complete: (body: Record<string, unknown>, signal: AbortSignal, keyId?: string) => Promise<UpstreamResponse>;
  /** the runtime's counters: a turn answered (and how fast) or failed */
  record: (ok: boolean, ms: number) => void;
  modelMissing: () => { error: { message: string } };
  log: RuntimeLogger;
};

/** `upgrade` takes an authenticated upgrade of /ws (gateway-http.ts); `close` closes every chat socket. */
export function createWebSocketChat(ctx: WebSocketChatContext) {
  const { limits, log } = ctx;
  let server: Promise<WebSocketServer> | undefined;
  let closing = false;
  const load = () =>
    (server ??= import('ws').then(({ WebSocketServer }) => new WebSocketServer({ noServer: true, maxPayload: limits.wsMaxMessageBytes })));
  return {
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      load().then(
        (wss) => {
          if (closing || socket.destroyed) return void socket.destroy();
          // the API key the platform opened the socket for: every turn's model call is charged to it
          const keyId = namedKey(req.headers[KEY_ID_HEADER]);
          wss.handleUpgrade(req, socket, head, (ws) => {
            ws.on('error', (err) => log.error({ source: 'chat', err: err.message }, 'websocket error'));
            chat(ctx, ws, keyId);
          });
        },
        (err: Error) => {
          log.error({ source: 'chat', err: err.message }, 'websocket library could not be loaded');
          socket.destroy();
        },
      );
    },
    close(): void {
      closing = true;
      void server?.then((wss) => {
        for (const client of wss.clients) client.close();
        wss.close();
      });
    },
  };
}

// Floods are bounded: message size (maxPayload), messages per second per socket (token bucket),
// one turn at a time per socket with a short queue, and the agent-wide model call limiter.
function chat(ctx: WebSocketChatContext, socket: WebSocket, keyId: string | undefined): void {
  const { options, limits, modelSlots, complete, record, modelMissing, log } = ctx;
  const history: ChatMessage[] = [];
  let historyChars = 0;
  let tokens = limits.wsBurst;
  let refilledAt = Date.now();
  const pending: { content: string; model: string | undefined }[] = [];
  let running = false;
  let closed = false;
  socket.on('close', () => {
    closed = true;
    pending.length = 0;
  });
  const send = (frame: Record<string, unknown>) => {
    if (!closed) socket.send(JSON.stringify(frame));
  };

  const runTurn = async (content: string, modelName: string | undefined) => {
    const release = await modelSlots.acquire();
    if (!release) {
      send({ type: 'error', error: 'This agent is busy: too many chat requests at once; retry shortly', code: 'AGENT_BUSY' });
      return;
    }
    try {
      if (closed) return;
      history.push({ role: 'user', content });
      historyChars += content.length;
      while (history.length > 40 || (historyChars > limits.wsHistoryChars && history.length > 1))
        historyChars -= String(history.shift()!.content).length;
      const started = Date.now();
      try {
        const res = await complete(
          { model: modelName, messages: withSystemPrompt(history, options.systemPrompt) },
          AbortSignal.timeout(Math.min(LIMITS.chatWebSocketTimeoutMs, options.model.timeoutMs)),
          keyId,
        );
        if (!res.ok) throw new ModelRefusal(res.status, await res.text().catch(() => ''));
        const json = (await res.json()) as { choices?: { message?: { content?: string } }[] };
        const reply = json.choices?.[0]?.message?.content ?? '';
        history.push({ role: 'assistant', content: reply });
        historyChars += reply.length;
        record(true, Date.now() - started);
        log.info({ source: 'chat', model: modelName, ms: Date.now() - started, channel: 'websocket' }, 'chat reply sent');
        send({ type: 'reply', content: reply });
        options.reportTurn?.({ user: content, reply, responseMs: Date.now() - started, channel: 'websocket' });
      } catch (err) {
        const last = history[history.length - 1];
        if (last?.role === 'user' && last.content === content) {
          history.pop();
          historyChars -= content.length;
        }
        record(false, 0);
        log.error({ source: 'chat', err: (err as Error).message }, 'websocket chat failed');
        const timeout = (err as Error).name === 'TimeoutError';
        if (err instanceof ModelRefusal)
          send({
            type: 'error',
            error: err.message,
            ...(err.code ? { code: err.code } : {}),
            ...(err.allowedModels ? { allowedModels: err.allowedModels } : {}),
          });
        else send({ type: 'error', error: timeout ? 'The model provider did not answer in time' : 'The model provider failed' });
      }
    } finally {
      release();
    }
  };

  const drain = async () => {
    if (running) return;
    running = true;
    try {
      while (pending.length > 0 && !closed) {
        const next = pending.shift()!;
        await runTurn(next.content, next.model);
      }
    } finally {
      running = false;
    }
  };

  socket.on('message', (raw: Buffer) => {
    const now = Date.now();
    tokens = Math.min(limits.wsBurst, tokens + ((now - refilledAt) / 1000) * limits.wsMessagesPerSecond);
    refilledAt = now;
    if (tokens < 1) {
      send({ type: 'error', error: `Too many messages: at most ${limits.wsMessagesPerSecond} per second`, code: 'RATE_LIMITED' });
      return;
    }
    tokens -= 1;
    let msg: { type?: unknown; content?: unknown; model?: unknown };
    try {
      msg = JSON.parse(raw.toString('utf8'));
    } catch {
      send({ type: 'error', error: 'messages must be JSON' });
      return;
    }
    if (msg.type === 'ping') {
      send({ type: 'pong' });
      return;
    }
    if (msg.type !== 'chat' || typeof msg.content !== 'string' || msg.content.length === 0) {
      send({ type: 'error', error: "expected {type:'chat', content:string}" });
      return;
    }
    if (!options.model.baseUrl) {
      send({ type: 'error', error: modelMissing().error.message, code: 'MODEL_NOT_CONFIGURED' });
      return;
    }
    if (pending.length >= limits.wsQueuePerSocket) {
      send({ type: 'error', error: 'Too many chat messages waiting on this connection; wait for the replies', code: 'QUEUE_FULL' });
      return;
    }
    const model = typeof msg.model === 'string' && msg.model ? msg.model : options.model.defaultModel;
    pending.push({ content: msg.content, model });
    void drain();
  });
}
