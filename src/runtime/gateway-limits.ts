/**
 * The gateway's flood and slow-client limits (docs/agents.md "Agent gateway limits") and the
 * bounded semaphore that caps concurrent model calls per agent.
 */

/** Flood and slow-client limits of the gateway (docs/agents.md "Agent gateway limits"). */
export type GatewayLimits = {
  /** largest WebSocket message accepted (bytes); a larger one closes the socket with 1009 */
  wsMaxMessageBytes: number;
  /** WebSocket messages per second per socket (token bucket refill) and the bucket size */
  wsMessagesPerSecond: number;
  wsBurst: number;
  /** chat turns one socket may have waiting behind its running one; more are refused with an error frame */
  wsQueuePerSocket: number;
  /** model calls in flight at once for this agent (HTTP and WebSocket together) */
  maxConcurrentModelCalls: number;
  /** model calls waiting for a slot; beyond it HTTP answers 429 and WebSocket an error frame */
  modelQueue: number;
  /** characters of conversation a WebSocket keeps (oldest turns dropped first) */
  wsHistoryChars: number;
  /** time to receive the request headers, the whole request, and an idle keep-alive connection's next request */
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
};

export const DEFAULT_GATEWAY_LIMITS: GatewayLimits = {
  wsMaxMessageBytes: 256 * 1024,
  wsMessagesPerSecond: 5,
  wsBurst: 10,
  wsQueuePerSocket: 4,
  maxConcurrentModelCalls: 4,
  modelQueue: 32,
  wsHistoryChars: 200_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
};

/** A counting semaphore with a bounded queue: `acquire` resolves with a release, or with undefined when the queue is full. */
export function createLimiter(max: number, queueMax: number) {
  let active = 0;
  const waiting: (() => void)[] = [];
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else active -= 1;
  };
  return {
    async acquire(): Promise<(() => void) | undefined> {
      if (active < max) {
        active += 1;
        return once(release);
      }
      if (waiting.length >= queueMax) return undefined;
      await new Promise<void>((resolve) => waiting.push(resolve));
      return once(release);
    },
    get active() {
      return active;
    },
  };
}
const once = (fn: () => void) => {
  let done = false;
  return () => {
    if (!done) {
      done = true;
      fn();
    }
  };
};
