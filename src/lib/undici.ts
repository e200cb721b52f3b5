/**
 * undici, loaded on first use. Its import costs a process ~30 MB resident (it brings Node's own
 * bundled undici along; docs/benchmarks.md "Memory"), and neither app needs it at rest: the model
 * providers' pools, the agent proxy's dispatcher and the webhook deliveries make theirs on their
 * first call, which waits once for the import (milliseconds). Type-only imports cost nothing.
 */
type Undici = typeof import('undici');

let loading: Promise<Undici> | undefined;
let loaded: Undici | undefined;

export const undici = (): Promise<Undici> =>
  (loading ??= import('undici').then((m) => {
    loaded = m;
    return m;
  }));

/** undici once something has loaded it, else undefined: lets a hot path skip the await after its first call */
export const undiciIfLoaded = (): Undici | undefined => loaded;
