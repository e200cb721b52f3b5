/**
 * One timeout shared by many short calls: AI_TIMEOUT_MS for every provider attempt.
 *
 * A `setTimeout` and `clearTimeout` per call cost ~2 µs of the AI proxy's CPU per request at
 * concurrency 64 (Node's Timeout object, reading libuv's clock, ref/unref and the timer list, in its
 * profile: docs/benchmarks.md "AI proxy", round 4), for a timer that almost never fires. Every
 * entry here has the same duration, so entries sorted by insertion are sorted by deadline: a doubly
 * linked list (O(1) add and remove) swept from its head by one interval timer that runs only while
 * the list is not empty. The clock is read by the sweep, not per call: an entry fires between `ms`
 * and `ms` + 2 ticks after it was added, a tick being 1/20 of `ms` (5 ms to 250 ms).
 */
export type DeadlineEntry<T> = { value: T; at: number; prev: DeadlineEntry<T> | null; next: DeadlineEntry<T> | null; live: boolean };

export function createDeadlineList<T>(ms: number, onExpired: (value: T) => void) {
  const tickMs = Math.max(5, Math.min(250, Math.floor(ms / 20)));
  let head: DeadlineEntry<T> | null = null;
  let tail: DeadlineEntry<T> | null = null;
  let size = 0;
  /** the clock as of the last tick (or the first add after an idle spell) */
  let now = 0;
  let timer: NodeJS.Timeout | undefined;

  const unlink = (e: DeadlineEntry<T>) => {
    if (e.prev) e.prev.next = e.next;
    else head = e.next;
    if (e.next) e.next.prev = e.prev;
    else tail = e.prev;
    e.prev = e.next = null;
    e.live = false;
    size -= 1;
  };

  const sweep = () => {
    now = Date.now();
    while (head && head.at <= now) {
      const e = head;
      unlink(e);
      try {
        onExpired(e.value);
      } catch (err) {
        process.nextTick(() => {
          throw err;
        });
      }
    }
    if (size === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  return {
    /** Starts `value`'s deadline; `remove` the entry when the call ends first. */
    add(value: T): DeadlineEntry<T> {
      if (!timer) {
        now = Date.now();
        timer = setInterval(sweep, tickMs);
        timer.unref(); // a pending deadline never keeps the process alive
      }
      // `now` lags the clock by at most a tick: the entry fires at most a tick early otherwise, so a tick is added
      const e: DeadlineEntry<T> = { value, at: now + ms + tickMs, prev: tail, next: null, live: true };
      if (tail) tail.next = e;
      else head = e;
      tail = e;
      size += 1;
      return e;
    },
    /** Ends an entry's deadline (a no-op once it fired or was removed). */
    remove(e: DeadlineEntry<T>): void {
      if (e.live) unlink(e);
    },
    /** entries waiting (tests) */
    get size() {
      return size;
    },
  };
}
