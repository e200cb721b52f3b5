/**
 * autocannon wrapper: one measurement = a warm-up phase and a measured phase, run in a child
 * process (load-child.ts) so the load generator and the server under test do not share an event
 * loop. Returns throughput and latency percentiles of the measured phase.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export type LoadOptions = {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  /** a `cookie` header picked at random per request from these (many sessions, e.g. cache misses) */
  cookies?: string[];
  body?: string;
  connections: number;
  pipelining?: number;
  /** measured seconds */
  durationS: number;
  /** seconds of load before the measured phase, discarded */
  warmupS: number;
};

export type LoadResult = {
  /** mean requests per second over the measured phase */
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  meanMs: number;
  totalRequests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  durationS: number;
  connections: number;
  pipelining: number;
};

const CHILD = fileURLToPath(new URL('./load-child.ts', import.meta.url));

type AutocannonJson = {
  requests: { average: number; total: number };
  latency: { p50: number; p90: number; p99: number; average: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  duration: number;
  connections: number;
  pipelining: number;
};

export async function measure(opts: LoadOptions): Promise<LoadResult> {
  const child = spawn(process.execPath, [CHILD, JSON.stringify(opts)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  if (code !== 0) throw new Error(`autocannon child exited with ${code}: ${err.trim()}`);
  const r = JSON.parse(out.trim().split('\n').pop()!) as AutocannonJson;
  return {
    rps: r.requests.average,
    p50Ms: r.latency.p50,
    p90Ms: r.latency.p90,
    p99Ms: r.latency.p99,
    meanMs: r.latency.average,
    totalRequests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    durationS: r.duration,
    connections: r.connections,
    pipelining: r.pipelining,
  };
}

/** Settings shared by the benches; BENCH_DURATION (seconds per measurement) / BENCH_WARMUP / BENCH_CONNECTIONS / BENCH_ROUNDS override. */
export function loadSettings(defaults: { durationS: number; warmupS: number; connections: number; rounds?: number }) {
  const num = (name: string, fallback: number) => {
    const v = process.env[name];
    if (v === undefined || v === '') return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number (got ${JSON.stringify(v)})`);
    return n;
  };
  return {
    durationS: num('BENCH_DURATION', defaults.durationS),
    warmupS: num('BENCH_WARMUP', defaults.warmupS),
    connections: num('BENCH_CONNECTIONS', defaults.connections),
    rounds: Math.max(1, Math.round(num('BENCH_ROUNDS', defaults.rounds ?? 1))),
  };
}

export type LoadCase = { key: string; url: string; method?: string; headers?: Record<string, string>; cookies?: string[]; body?: string };

export type RoundsResult = LoadResult & {
  /** req/s of each round, in order */
  roundsRps: number[];
  /** per round: this case's req/s over the baseline's req/s in the same round */
  roundsRatio: number[];
  /** median of roundsRatio */
  ratio: number;
};

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/**
 * Measures every case in `rounds` round-robin passes (baseline first in each pass), so a burst of
 * other work on a shared machine lands on one short slice of every case instead of on one whole
 * case. Per case: req/s is the median over rounds; p50/p99 come from the median-throughput round;
 * the ratio is the median of per-round ratios against the baseline measured in the same pass.
 * The first pass warms each server up for `warmupS`, later passes for 1 s.
 */
export async function measureRounds(
  baseline: LoadCase,
  cases: LoadCase[],
  opts: { rounds: number; durationS: number; warmupS: number; connections: number; pipelining?: number; onStep?: (label: string) => void },
): Promise<Record<string, RoundsResult>> {
  const all = [baseline, ...cases];
  const runs = new Map<string, LoadResult[]>(all.map((c) => [c.key, []]));
  for (let r = 0; r < opts.rounds; r++) {
    for (const c of all) {
      opts.onStep?.(`round ${r + 1}/${opts.rounds} ${c.key}`);
      const res = await measure({
        url: c.url,
        headers: c.headers ?? {},
        ...(c.cookies ? { cookies: c.cookies } : {}),
        ...(c.method ? { method: c.method } : {}),
        ...(c.body !== undefined ? { body: c.body } : {}),
        connections: opts.connections,
        pipelining: opts.pipelining ?? 1,
        durationS: opts.durationS,
        warmupS: r === 0 ? opts.warmupS : Math.min(1, opts.warmupS),
      });
      runs.get(c.key)!.push(res);
    }
  }
  const base = runs.get(baseline.key)!;
  const out: Record<string, RoundsResult> = {};
  for (const c of all) {
    const rs = runs.get(c.key)!;
    const rps = rs.map((x) => x.rps);
    const mid = median(rps);
    const at = rs.reduce((best, x) => (Math.abs(x.rps - mid) < Math.abs(best.rps - mid) ? x : best), rs[0]!);
    const roundsRatio = rs.map((x, i) => x.rps / base[i]!.rps);
    out[c.key] = {
      ...at,
      rps: mid,
      totalRequests: rs.reduce((s, x) => s + x.totalRequests, 0),
      non2xx: rs.reduce((s, x) => s + x.non2xx, 0),
      errors: rs.reduce((s, x) => s + x.errors, 0),
      timeouts: rs.reduce((s, x) => s + x.timeouts, 0),
      durationS: rs.reduce((s, x) => s + x.durationS, 0),
      roundsRps: rps.map((x) => Math.round(x)),
      roundsRatio: roundsRatio.map((x) => Math.round(x * 100) / 100),
      ratio: median(roundsRatio),
    };
  }
  return out;
}
