/**
 * The bounded semaphore that caps an agent's concurrent model calls. The gateway's flood and
 * slow-client limits themselves are in src/config/limits.ts (the platform's proxy sizes its
 * WebSocket frames by them too).
 */

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
