/**
 * Coalesces lookups by key into few calls of `load` (the DataLoader pattern, without its cache).
 * Keys asked in the same turn of the event loop form one batch; while `maxInFlight` batches are
 * already being answered, new keys wait and join the next batch, which starts as soon as one
 * returns. So a lone request waits only for the end of the current turn (`setImmediate`), and
 * under load batches grow by themselves: one database round trip answers many requests instead
 * of one each. Identical keys in one batch are asked once. Nothing is remembered between
 * batches: every answer is as fresh as an unbatched query made when its batch started.
 */
export type BatchLoader<K, V> = (key: K) => Promise<V | undefined>;

export function createBatchLoader<K, V>(options: {
  /** answers for the keys it knows; keys it leaves out resolve to undefined */
  load: (keys: K[]) => Promise<Map<string, V>>;
  /** the identity of a key (Map key in `load`'s answer) */
  id: (key: K) => string;
  /** most keys per call of `load`; more form further batches */
  maxBatch?: number;
  /** most calls of `load` under way at once (default 2) */
  maxInFlight?: number;
}): BatchLoader<K, V> {
  const maxBatch = options.maxBatch ?? 100;
  const maxInFlight = options.maxInFlight ?? 2;
  let inFlight = 0;
  type Waiter = { key: K; resolve: (v: V | undefined) => void; reject: (e: unknown) => void };
  const pending = new Map<string, Waiter[]>();
  let scheduled = false;

  const run = (batch: Map<string, Waiter[]>) => {
    inFlight++;
    const keys = [...batch.values()].map((w) => w[0]!.key);
    const settle = () => {
      inFlight--;
      if (pending.size > 0 && !scheduled) flush();
    };
    // a synchronous throw of `load` fails its batch like a rejection
    Promise.resolve()
      .then(() => options.load(keys))
      .then(
        (found) => {
          settle();
          for (const [id, waiters] of batch) for (const w of waiters) w.resolve(found.get(id));
        },
        (err: unknown) => {
          settle();
          for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
        },
      );
  };

  /** Starts batches from the pending keys while fewer than maxInFlight are under way. */
  const flush = () => {
    scheduled = false;
    while (pending.size > 0 && inFlight < maxInFlight) {
      const batch = new Map<string, Waiter[]>();
      for (const [id, waiters] of pending) {
        batch.set(id, waiters);
        pending.delete(id);
        if (batch.size === maxBatch) break;
      }
      run(batch);
    }
  };

  return (key) =>
    new Promise<V | undefined>((resolve, reject) => {
      const id = options.id(key);
      const waiters = pending.get(id);
      if (waiters) waiters.push({ key, resolve, reject });
      else pending.set(id, [{ key, resolve, reject }]);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
}
