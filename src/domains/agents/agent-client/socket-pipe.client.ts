/**
 * A caller's WebSocket piped to an agent's gateway `/ws` (the gateway proxy's sockets,
 * docs/security.md N10): messages pass through as they are, within bounds, so a slow reader or an
 * agent that is not ready yet never makes the platform hold more than the limits say. The URL and
 * the gateway token come from the agent client (./agent.client.ts), the one place that builds them.
 */
import WebSocket from 'ws';

/** Bounds of a piped WebSocket (the proxy's, docs/security.md N10). */
export type SocketPipeLimits = {
  /** largest message from the agent */
  agentMessageBytes: number;
  /** messages and bytes held for the agent until its socket opens */
  pendingMessages: number;
  pendingBytes: number;
  /** bytes sent to one side and not yet written out before the other side stops being read */
  unwrittenBytes: number;
};

/**
 * Passes `from`'s messages to `to`, and stops reading `from` while more than `unwrittenBytes`
 * sent to `to` are not written out yet (a slow reader on either side must not make the platform
 * hold what the other side keeps sending). `early` takes what arrives while `to` is not open.
 */
function relay(from: WebSocket, to: WebSocket, unwrittenBytes: number, early: (data: Buffer, binary: boolean) => void = () => {}) {
  let unwritten = 0;
  from.on('message', (data: Buffer, binary) => {
    if (to.readyState !== WebSocket.OPEN) return early(data, binary);
    unwritten += data.length;
    to.send(data, { binary }, () => {
      unwritten -= data.length;
      if (from.isPaused && unwritten <= unwrittenBytes) from.resume();
    });
    if (unwritten > unwrittenBytes) from.pause();
  });
}

/**
 * Pipes `client` to a new WebSocket on `agent.url`: messages pass through as they are, within
 * `limits` (what the client sends before the agent's socket opens waits, bounded: more closes both
 * with 1013; a reader that falls behind pauses the other side). Either side closing closes the
 * other; `close` ends both (the caller's revocation). An agent that cannot be reached, or refuses
 * the socket, is told to `agent.onUnreachable`.
 */
export function pipeSocket(
  client: WebSocket,
  agent: { url: string; authorization: string; headers?: Record<string, string> | undefined; onUnreachable?: () => void },
  limits: SocketPipeLimits,
): { close(code: number, reason: string): void } {
  const upstream = new WebSocket(agent.url, {
    headers: { ...agent.headers, authorization: agent.authorization },
    maxPayload: limits.agentMessageBytes,
  });
  const closeBoth = (code?: number, reason?: string | Buffer) => {
    const c = code && code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1011;
    if (client.readyState === WebSocket.OPEN) client.close(c, reason);
    if (upstream.readyState === WebSocket.OPEN) upstream.close(c, reason);
    else if (upstream.readyState === WebSocket.CONNECTING) upstream.terminate();
  };
  // what the client sends before the agent's socket opens waits here, bounded
  const pending: { data: Buffer; binary: boolean }[] = [];
  let pendingBytes = 0;
  relay(client, upstream, limits.unwrittenBytes, (data, binary) => {
    if (upstream.readyState !== WebSocket.CONNECTING) return;
    pendingBytes += data.length;
    if (pending.length >= limits.pendingMessages || pendingBytes > limits.pendingBytes) {
      pending.length = 0;
      closeBoth(1013, 'The agent is not ready; send again once it answers');
    } else pending.push({ data, binary });
  });
  relay(upstream, client, limits.unwrittenBytes);
  upstream.on('open', () => {
    for (const m of pending.splice(0)) upstream.send(m.data, { binary: m.binary });
    pendingBytes = 0;
  });
  upstream.on('close', (code, reason) => closeBoth(code, reason));
  upstream.on('error', () => {
    agent.onUnreachable?.();
    closeBoth(1011);
  });
  upstream.on('unexpected-response', (_req, res) => {
    res.resume();
    agent.onUnreachable?.();
    closeBoth(1011);
  });
  // a message over the client's limit: ws has already closed the client's socket with 1009
  client.on('close', (code, reason) => closeBoth(code === 1005 ? 1000 : code, reason));
  client.on('error', () => closeBoth(1011));
  return { close: (code, reason) => closeBoth(code, reason) };
}
