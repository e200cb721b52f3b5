/**
 * A cheap cancellation for the hot request paths (the AI proxy, the agents' AI gateway).
 *
 * Node's AbortController is expensive for what a proxied call needs of it: making a signal costs
 * ~1.6 µs and each `abort` listener ~1.3 µs on this project's machines (EventTarget set-up, weak
 * references for `AbortSignal.any`), and a proxied chat made three of them (the client's disconnect,
 * the attempt, the upstream call's listener): ~6 µs of a ~110 µs request (docs/benchmarks.md
 * "AI proxy", round 4). `CallSignal` is the part of AbortSignal the AI layer and undici use —
 * `aborted`, `reason` and `abort` listeners — so an AbortSignal still satisfies it (tests, the web
 * routes), and `Cancellation` implements it with an array.
 *
 * undici accepts it as a request's `signal` (it needs `aborted`, `reason` and add/removeEventListener,
 * lib/api/api-request.js and lib/core/util.js `addAbortListener`).
 */
export type CallSignal = {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
};

export class Cancellation implements CallSignal {
  aborted = false;
  reason: unknown = undefined;
  /** null until a listener is added; cleared once aborted (every listener runs once, as `{ once: true }`) */
  private listeners: (() => void)[] | null = null;

  /** As on an AbortSignal: a listener added after the abort is never called. */
  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.aborted) return;
    (this.listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const l = this.listeners;
    if (!l) return;
    const i = l.lastIndexOf(listener);
    if (i !== -1) l.splice(i, 1);
  }

  /**
   * Aborts once: later calls do nothing. A listener that throws does not stop the others; its error
   * is rethrown on the next tick, as an EventTarget reports it (an uncaught exception).
   */
  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason ?? new DOMException('This operation was aborted', 'AbortError');
    const l = this.listeners;
    this.listeners = null;
    if (!l) return;
    for (const f of l) {
      try {
        f();
      } catch (err) {
        process.nextTick(() => {
          throw err;
        });
      }
    }
  }
}
