/**
 * Summarises a V8 `.cpuprofile` (node --cpu-prof) by part: self time of each sampled function,
 * grouped by where its code lives (a package under node_modules, a file of ours, Node's own
 * internals, GC, idle). The proxy benches use it to show where the per-request CPU goes.
 */
import { readFileSync } from 'node:fs';

type Node = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] };
type Profile = { nodes: Node[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number };

/** The part a frame belongs to: `pkg:<name>`, `src/<path>`, `node:<module>`, or a V8 pseudo-frame. */
export function partOf(url: string, fn: string): string {
  if (!url) {
    if (fn === '(garbage collector)') return 'GC';
    if (fn === '(idle)' || fn === '(program)') return fn;
    return `native ${fn || '(anonymous)'}`;
  }
  const nm = url.lastIndexOf('/node_modules/');
  if (nm !== -1) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return `pkg:${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  if (url.startsWith('node:')) return url;
  const src = url.indexOf('/src/');
  if (src !== -1) return url.slice(src + 1);
  return url.replace(/^file:\/\//, '');
}

export type ProfileSummary = {
  /** sampled milliseconds, idle excluded */
  busyMs: number;
  totalMs: number;
  parts: { part: string; ms: number; share: number }[];
  functions: { fn: string; part: string; ms: number; share: number }[];
};

export function summariseProfile(file: string, top = 25): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  const parts = new Map<string, number>();
  const fns = new Map<string, { part: string; us: number }>();
  let busy = 0;
  let total = 0;
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const part = partOf(n.callFrame.url, n.callFrame.functionName);
    total += us;
    if (part === '(idle)') continue;
    busy += us;
    parts.set(part, (parts.get(part) ?? 0) + us);
    const key = `${n.callFrame.functionName || '(anonymous)'} ${part}:${n.callFrame.lineNumber + 1}`;
    const f = fns.get(key) ?? { part, us: 0 };
    f.us += us;
    fns.set(key, f);
  }
  const ms = (us: number) => Math.round(us / 100) / 10;
  const share = (us: number) => Math.round((us / busy) * 1000) / 10;
  return {
    busyMs: ms(busy),
    totalMs: ms(total),
    parts: [...parts].sort((a, b) => b[1] - a[1]).map(([part, us]) => ({ part, ms: ms(us), share: share(us) })),
    functions: [...fns]
      .sort((a, b) => b[1].us - a[1].us)
      .slice(0, top)
      .map(([fn, f]) => ({ fn, part: f.part, ms: ms(f.us), share: share(f.us) })),
  };
}

/**
 * The coarse parts a proxy's per-request CPU is reported by (docs/benchmarks.md): the first rule
 * whose pattern matches a part name wins; the profiler's own frames are left out.
 */
const GROUPS: [string, RegExp][] = [
  ['profiler (not counted)', /^node:inspector|^native (post|takeHeapSnapshot)/],
  ['socket writes (kernel, send syscalls)', /^native (writev|writeUtf8String|writeBuffer|writeLatin1String)$/],
  ['GC', /^GC$/],
  ['undici (upstream client)', /^pkg:undici$/],
  ['Node HTTP server and streams', /^node:(_http_|net|internal\/(streams|stream_base_commons|http))/],
  ['JSON parse of bodies', /^pkg:secure-json-parse$|^native parse$/],
  ['zod validation and serialization', /^pkg:(zod|fastify-type-provider-zod)$/],
  ['Fastify and its router', /^pkg:(fastify|find-my-way|light-my-request|avvio|@fastify\/.*)$/],
  ['pg (usage writes)', /^pkg:(pg|pg-protocol|pg-pool|pg-types|kysely)$/],
  ['logging (pino)', /^pkg:(pino|pino-std-serializers|sonic-boom)$/],
  ["the platform's own code (src/)", /^src\//],
  ["the floor's handler", /\[eval/],
  [
    'event loop, promises, timers',
    /^node:(internal\/(process\/task_queues|timers|async_hooks|abort_controller|event_target)|events|timers|async_hooks)|^native runMicrotasks$|^\(program\)$/,
  ],
];

/** Per-request CPU (µs) by coarse part, for `requests` requests served while profiling. */
export function perRequestByGroup(summary: ProfileSummary, requests: number): { group: string; us: number }[] {
  const groups = new Map<string, number>();
  for (const { part, ms } of summary.parts) {
    const g = GROUPS.find(([, re]) => re.test(part))?.[0] ?? 'other (Node internals, native)';
    groups.set(g, (groups.get(g) ?? 0) + ms);
  }
  return [...groups]
    .filter(([g]) => g !== 'profiler (not counted)')
    .sort((a, b) => b[1] - a[1])
    .map(([group, ms]) => ({ group, us: Math.round((ms * 1000) / requests) }));
}

// `node bench/lib/cpu-profile.ts FILE.cpuprofile [TOP [REQUESTS]]`: prints the summary
if (import.meta.main) {
  const s = summariseProfile(process.argv[2]!, Number(process.argv[3] ?? 40));
  console.log(`busy ${s.busyMs} ms of ${s.totalMs} ms sampled`);
  for (const x of s.parts.slice(0, 40)) console.log(`${String(x.share).padStart(5)}%  ${String(x.ms).padStart(8)} ms  ${x.part}`);
  console.log('');
  for (const x of s.functions) console.log(`${String(x.share).padStart(5)}%  ${String(x.ms).padStart(8)} ms  ${x.fn}`);
  if (process.argv[4])
    for (const g of perRequestByGroup(s, Number(process.argv[4]))) console.log(`${String(g.us).padStart(6)} µs  ${g.group}`);
}
