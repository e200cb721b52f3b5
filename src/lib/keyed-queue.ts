/**
 * Calls that share a key run one after another, in the order they were made; calls with different
 * keys run in parallel. A call runs whether the one before it succeeded or failed, and its own
 * result (or rejection) is what its caller gets. A key's entry is dropped once its last call ends,
 * so the map holds only keys with calls pending.
 */
export function createKeyedQueue() {
  const tails = new Map<string, Promise<unknown>>();
  return function queued<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const run = (tails.get(key) ?? Promise.resolve()).then(fn, fn);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    tails.set(key, tail);
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return run;
  };
}
