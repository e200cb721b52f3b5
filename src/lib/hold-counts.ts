/**
 * How many holds each key has open (a user's sockets, an agent's requests in flight). A hold is
 * given back by calling the function `hold` returns; calling it again does nothing, so a release
 * wired to several events (close, error, abort) counts once. A key with no hold left is dropped.
 */
export function createHoldCounts() {
  const counts = new Map<string, number>();
  return {
    count: (key: string) => counts.get(key) ?? 0,
    /** The keys holding at least one. */
    held: () => counts.keys(),
    /** Takes a hold on `key`; `onRelease` runs when it is given back (once). */
    hold(key: string, onRelease?: () => void): () => void {
      counts.set(key, (counts.get(key) ?? 0) + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (counts.get(key) ?? 1) - 1;
        if (left > 0) counts.set(key, left);
        else counts.delete(key);
        onRelease?.();
      };
    },
  };
}
