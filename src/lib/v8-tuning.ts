/**
 * V8 settings for a serving process (the platform's apps), applied at start by src/main.ts.
 *
 * Allocation-site pretenuring off. V8 watches how many objects of each allocation site survive
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
 */
import { setFlagsFromString } from 'node:v8';

export function tuneV8ForServing(): void {
  const asked = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) => a.includes('allocation-site-pretenuring'));
  // a runtime V8 flag: read by the heap when it decides about a site, so setting it now applies from here on
  if (!asked) setFlagsFromString('--no-allocation-site-pretenuring');
}
