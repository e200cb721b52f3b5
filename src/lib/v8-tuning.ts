/**
 * V8 settings for a serving process (the platform's apps), applied at start by src/main.ts.
 *
 * 1. Allocation-site pretenuring off. V8 watches how many objects of each allocation site survive
 * young-generation collections and, past a threshold, allocates that site's objects straight into
 * the old generation. A burst of concurrent requests right after start (64 in flight while the young
 * generation is still small) makes request-scoped sites look long-lived; once pretenured they stay
 * so, because objects allocated old leave no trace of dying young. Every request's objects then land
 * in the old generation: measured on the backend at 64 concurrent requests, each scavenge took
 * 15–17 ms and moved ~19 MB into the old space (4 KB per request, even for a 404), followed by
 * mark-compacts; with pretenuring off, 0.3–0.6 ms and nothing moved, and the AI gateway's CPU per
 * proxied call fell 13% (107 → 93 µs), POST /api/ai/chat's 6% (docs/benchmarks.md "AI proxy",
 * round 4). The cost: objects that really are long-lived (caches, pools) are copied once more
 * before they settle, which a server that allocates them at start-up barely notices.
 * An explicit `--allocation-site-pretenuring` in NODE_OPTIONS or the node command line wins.
 *
 * 2. One tick object kept for the life of the process (keepTickObjectShape). Node's
 * `process.nextTick` builds each queued tick as an object literal whose first keys are computed
 * (`{ [async_id_symbol]: …, [trigger_async_id_symbol]: …, [async_context_frame]: …, callback, args }`).
 * V8 defines such keys through `DefineKeyedOwnPropertyInLiteral`, whose feedback knows only two
 * states: one map, or megamorphic for good. The maps a tick object passes through are reachable
 * only from tick objects (transitions are weak), so a full collection at a moment when no tick is
 * queued frees them, the next tick builds new ones, the feedback sees a map it did not record and
 * turns megamorphic, and from then on the optimized nextTick calls into the runtime for each key.
 * Under load that happens within seconds: measured on the backend (docs/benchmarks.md "AI proxy",
 * round 6), a nextTick call went from ~35 ns to ~300–430 ns, ~8 calls per proxied request, and the
 * runtime calls were 11% of the backend's instructions per request. Holding one real tick object
 * (caught through an async hook's `init` while one nextTick is made) keeps the whole chain of maps
 * alive, so the feedback stays on one map and the define stays inline. test/lib/v8-tuning.test.ts
 * shows both states. One limit: async ids are counted in a double; past 2^31 (billions of async
 * operations) V8 widens the id field once, the maps change anyway and the slow path returns.
 */
import { createHook } from 'node:async_hooks';
import { setFlagsFromString } from 'node:v8';

export function tuneV8ForServing(): void {
  const asked = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) => a.includes('allocation-site-pretenuring'));
  // a runtime V8 flag: read by the heap when it decides about a site, so setting it now applies from here on
  if (!asked) setFlagsFromString('--no-allocation-site-pretenuring');
  keepTickObjectShape();
}

/** The tick object held for the process's life (item 2 above); never read. */
let keptTickObject: object | undefined;

/** Item 2 above: makes one nextTick with an `init` hook on, keeps the TickObject it reports. Idempotent. */
export function keepTickObjectShape(): boolean {
  if (keptTickObject !== undefined) return true;
  const hook = createHook({
    init(_asyncId, type, _triggerAsyncId, resource) {
      if (type === 'TickObject' && keptTickObject === undefined) keptTickObject = resource;
    },
  });
  hook.enable();
  try {
    process.nextTick(() => {});
  } finally {
    hook.disable();
  }
  return keptTickObject !== undefined;
}
