/**
 * The AI proxy measured as from outside, against the floor in the same run: every server in its
 * own process (bench/lib/proxy-processes.ts), load from autocannon in another (bench/lib/load.ts) at
 * concurrency 64 and from the caller's hrtime client at concurrency 1.
 *   upstream — node:http answering a fixed 100-token completion at once (no delay: at
 *              concurrency 64 the proxies are CPU-bound, which is what a throughput ratio measures);
 *   floor    — bare Fastify + undici Pool(128) forwarding POST /v1/chat/completions;
 *   platform — the backend's POST /api/ai/chat with the bearer key and §4.9 plan headers
 *              (x-user-plan, x-stripe-subscription-id; no x-user-id), a ~2.5 KB body, the per-IP
 *              limiter on with AI_RATE_LIMIT lifted, LOG_LEVEL=warn, usage recorded to PostgreSQL;
 *   gateway  — the same backend's AI gateway for agents (POST /api/agent-gateway/v1/chat/completions)
 *              with an agent's `apk_` key: key lookup, the owner's stored plan (network), the
 *              per-agent limit (AGENT_GATEWAY_RATE_LIMIT lifted), the agent's budget, the same body.
 * Targets, for the platform and the gateway each: at concurrency 64 ≥ 0.9x the floor's req/s; at
 * concurrency 1 a mean latency over the floor's of ≤ 0.2 ms. Then, round-robin, short windows at 64
 * with each process under V8's sampling profiler: where each spends its CPU per request, by part.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { MODEL_GATEWAY_PATH } from '../../src/config/env.ts';
import { sha256 } from '../../src/lib/crypto.ts';
import { stopProcess } from './bench-db.ts';
import { perRequestByGroup, summariseProfile } from './cpu-profile.ts';
import { type LoadResult, measure } from './load.ts';
import { type Proc, realisticChatBody, spawnWithPort, startFloorProcess, startUpstream100 } from './proxy-processes.ts';
import { round } from './report.ts';

const BACKEND_CHILD = join(import.meta.dirname, 'backend-child.ts');

/** The proxies measured against the floor (each a case below). */
const PROXIES = ['platform', 'gateway'] as const;

const GATEWAY_KEY = 'apk_outside_bench_gateway_key';

/**
 * An owner on the network plan with an active subscription and one running agent whose platform
 * key is GATEWAY_KEY, written straight to the bench database (as a deploy would leave them: the
 * key's SHA-256 in agent_credentials).
 */
async function seedGatewayAgent(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO users (email, name, referral_code, plan, subscription_status)
       VALUES ('gateway-bench@example.com', 'Gateway bench', 'GATEWAYBENCH', 'network', 'active') RETURNING id`,
    );
    const userId = rows[0]!.id;
    await client.query(
      `INSERT INTO agents (id, user_id, name, subdomain, url, status) VALUES ('gateway-bench', $1, 'Gateway bench', 'gateway-bench', 'http://127.0.0.1:9', 'running')`,
      [userId],
    );
    await client.query(
      `INSERT INTO agent_credentials (agent_id, user_id, gateway_token_enc, platform_key_hash, platform_key_prefix)
       VALUES ('gateway-bench', $1, 'unused', $2, $3)`,
      [userId, sha256(GATEWAY_KEY), GATEWAY_KEY.slice(0, 12)],
    );
  } finally {
    await client.end();
  }
}

type Case = { key: string; url: string; headers: Record<string, string>; body: string; proc?: Proc };

export type OutsideResult = {
  levels: Record<string, { rps: Record<string, number[]>; meanMs: Record<string, number[]>; failures: number }>;
  /** per proxy (platform, gateway), per round: its req/s over the floor's at concurrency 64 */
  ratio64: Record<string, number[]>;
  /** per round at concurrency 64: CPU µs per request of each proxy process (Linux only) */
  cpuPerRequestUs: Record<string, number[]>;
  /** per proxy, per round: floor CPU per request over the proxy's (the throughput ratio CPU-bound proxies would have) */
  cpuRatio64: Record<string, number[]>;
  /** per proxy, per round: its mean − the floor's mean at concurrency 1, ms */
  ownShare1Ms: Record<string, number[]>;
  profile?: { requests: Record<string, number>; perRequestUs: Record<string, { group: string; us: number }[]> };
};

/**
 * CPU time (user + system, µs) a process has used, from /proc (Linux); undefined elsewhere. CPU per
 * request is what a throughput ratio measures when the proxy is the bottleneck, and unlike req/s it
 * barely moves when other work on a shared machine takes the cores for a while.
 */
function cpuMicros(pid: number | undefined): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100; // utime + stime in clock ticks (USER_HZ 100)
  } catch {
    return undefined;
  }
}

const med = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

export async function measureOutside(opts: {
  dataDir: string;
  databaseUrl: string;
  rounds: number;
  durationS: number;
  /**
   * Concurrency 64: more, shorter rounds than at 1 (default `rounds` of `durationS`). Each ratio is
   * taken within a round, so the floor and the proxy are measured seconds apart; on a shared host
   * whose speed drifts by 2x over tens of seconds, short rounds pair them more closely and a median
   * over more of them is steadier (round 7).
   */
  rounds64?: number;
  duration64S?: number;
  /** the profile at concurrency 64: windows per case, round-robin, each `duration64S` long (default 3) */
  profileWindows?: number;
  warmupS: number;
  profileDir?: string;
  /**
   * The load client at concurrency 1: autocannon's latencies are whole milliseconds, too coarse
   * for a 0.2 ms target, so the caller passes its hrtime client (bench/ai-proxy.bench.ts `load`).
   */
  latencyClient?: (
    target: { key: string; url: string; headers: Record<string, string>; body: string },
    concurrency: number,
    durationS: number,
    warmupS: number,
  ) => Promise<{ rps: number; meanMs: number; failures: number }>;
  onStep?: (label: string) => void;
}): Promise<OutsideResult> {
  const upstream = await startUpstream100(0);
  const procs: Proc[] = [upstream];
  try {
    const floor = await startFloorProcess(`http://127.0.0.1:${upstream.port}`);
    procs.push(floor);
    const env = {
      DATA_DIR: opts.dataDir,
      LOG_LEVEL: 'warn',
      INTERNAL_API_KEY: 'bench-internal-key',
      ROUTER_API_KEY: 'bench-router-key',
      ROUTER_BASE_URL: upstream.base,
      AI_RATE_LIMIT: '1000000000',
      AGENT_GATEWAY_RATE_LIMIT: '1000000000',
    };
    await seedGatewayAgent(opts.databaseUrl);
    const backend = await spawnWithPort([BACKEND_CHILD, JSON.stringify(env), opts.databaseUrl]);
    procs.push(backend);
    const body = realisticChatBody('openai/gpt-4o-mini');
    const json = { 'content-type': 'application/json' };
    const cases: Case[] = [
      { key: 'direct', url: `${upstream.base}/chat/completions`, headers: json, body },
      { key: 'floor', url: floor.url, headers: json, body, proc: floor },
      {
        key: 'platform',
        url: `http://127.0.0.1:${backend.port}/api/ai/chat`,
        headers: { ...json, authorization: 'Bearer bench-internal-key', 'x-user-plan': 'network', 'x-stripe-subscription-id': 'sub_bench' },
        body,
        proc: backend,
      },
      {
        key: 'gateway',
        url: `http://127.0.0.1:${backend.port}${MODEL_GATEWAY_PATH}/chat/completions`,
        headers: { ...json, authorization: `Bearer ${GATEWAY_KEY}` },
        body,
        proc: backend,
      },
    ];
    for (const c of cases.slice(2)) {
      const check = await fetch(c.url, { method: 'POST', headers: c.headers, body });
      if (check.status !== 200) throw new Error(`${c.key} answered ${check.status}: ${(await check.text()).slice(0, 300)}`);
      await check.text();
    }

    const run = (c: Case, connections: number, durationS: number, warmupS: number): Promise<LoadResult> =>
      measure({ url: c.url, method: 'POST', headers: c.headers, body: c.body, connections, durationS, warmupS });
    const out: OutsideResult = { levels: {}, ratio64: {}, ownShare1Ms: {}, cpuPerRequestUs: {}, cpuRatio64: {} };
    for (const level of [1, 64]) {
      const l: OutsideResult['levels'][string] = { rps: {}, meanMs: {}, failures: 0 };
      out.levels[`concurrency${level}`] = l;
      const rounds = level === 64 ? (opts.rounds64 ?? opts.rounds) : opts.rounds;
      const durationS = level === 64 ? (opts.duration64S ?? opts.durationS) : opts.durationS;
      for (let r = 0; r < rounds; r++) {
        for (const c of cases) {
          opts.onStep?.(`outside c=${level} round ${r + 1}/${rounds} ${c.key}`);
          // a short warm-up after the first round: each case's process was idle while the others ran
          const warmupS = r === 0 ? opts.warmupS : Math.min(level === 64 ? 0.5 : 1, opts.warmupS);
          let res: { rps: number; meanMs: number; failures: number };
          if (level === 1 && opts.latencyClient) res = await opts.latencyClient(c, 1, durationS, warmupS);
          else {
            if (warmupS > 0) await run(c, level, warmupS, 0);
            const before = cpuMicros(c.proc?.proc.pid);
            const x = await run(c, level, durationS, 0);
            const after = cpuMicros(c.proc?.proc.pid);
            if (level === 64 && before !== undefined && after !== undefined && x.totalRequests > 0)
              (out.cpuPerRequestUs[c.key] ??= []).push(Math.round((after - before) / x.totalRequests));
            res = { ...x, failures: x.non2xx + x.errors + x.timeouts };
          }
          (l.rps[c.key] ??= []).push(Math.round(res.rps));
          (l.meanMs[c.key] ??= []).push(round(res.meanMs, 3));
          l.failures += res.failures;
        }
        for (const p of PROXIES) {
          if (level === 64) {
            (out.ratio64[p] ??= []).push(round(l.rps[p]!.at(-1)! / l.rps.floor!.at(-1)!, 3));
            const cpu = out.cpuPerRequestUs;
            if (cpu[p]?.length === r + 1 && cpu.floor?.length === r + 1)
              (out.cpuRatio64[p] ??= []).push(round(cpu.floor.at(-1)! / cpu[p].at(-1)!, 3));
          } else (out.ownShare1Ms[p] ??= []).push(round(l.meanMs[p]!.at(-1)! - l.meanMs.floor!.at(-1)!, 3));
        }
      }
    }
    if (opts.profileDir) {
      // profiled round-robin in short windows, as the rounds above (one 6 s window per case could
      // fall in a slow stretch of the host and double one column): each part's sampled time summed
      // over the windows, divided by the requests they served
      const requests: Record<string, number> = {};
      const usByGroup: Record<string, Map<string, number>> = {};
      const profiled = cases.filter((x) => x.proc);
      const windows = opts.profileWindows ?? 3;
      for (let w = 0; w < windows; w++) {
        for (const c of profiled) {
          opts.onStep?.(`outside profile ${c.key} ${w + 1}/${windows}`);
          await run(c, 64, w === 0 ? 1 : 0.5, 0); // warm, unprofiled
          await c.proc!.ask('profile');
          const res = await run(c, 64, opts.duration64S ?? opts.durationS, 0);
          const file = join(opts.profileDir, `${c.key}-c64-${w}.cpuprofile`);
          await c.proc!.ask(`save ${file}`);
          requests[c.key] = (requests[c.key] ?? 0) + res.totalRequests;
          const sums = (usByGroup[c.key] ??= new Map());
          // per "request" of 1: each part's whole sampled time in µs
          for (const { group, us } of perRequestByGroup(summariseProfile(file), 1)) sums.set(group, (sums.get(group) ?? 0) + us);
        }
      }
      const perRequestUs: Record<string, { group: string; us: number }[]> = {};
      for (const [key, sums] of Object.entries(usByGroup)) {
        perRequestUs[key] = [...sums]
          .sort((a, b) => b[1] - a[1])
          .map(([group, us]) => ({ group, us: Math.round(us / Math.max(1, requests[key]!)) }));
      }
      out.profile = { requests, perRequestUs };
    }
    return out;
  } finally {
    for (const p of procs.reverse()) await stopProcess(p.proc);
  }
}

/** The markdown of one outside run: the table of rounds, the targets, and the profile by part. */
export function outsideMarkdown(o: OutsideResult): string {
  const lines: string[] = [];
  lines.push('| concurrency | case | req/s (median; rounds) | mean ms (median; rounds) |', '|---:|---|---|---|');
  for (const [level, l] of Object.entries(o.levels)) {
    for (const key of Object.keys(l.rps)) {
      lines.push(
        `| ${level.replace('concurrency', '')} | ${key} | ${med(l.rps[key]!)} (${l.rps[key]!.join(', ')}) | ${round(med(l.meanMs[key]!), 3)} (${l.meanMs[key]!.join(', ')}) |`,
      );
    }
  }
  lines.push('');
  for (const p of Object.keys(o.ratio64)) {
    const r64 = med(o.ratio64[p]!);
    const own1 = med(o.ownShare1Ms[p]!);
    const cpu = o.cpuRatio64[p];
    lines.push(
      `- ${p}, concurrency 64: ${p} / floor throughput **${r64}** (rounds: ${o.ratio64[p]!.join(', ')}; target ≥ 0.9) — ${r64 >= 0.9 ? 'met' : 'not met'}`,
      ...(cpu?.length
        ? [
            `- ${p}, concurrency 64, CPU per request of each process (/proc, whole measured phase): floor ${med(o.cpuPerRequestUs.floor!)} µs ` +
              `(${o.cpuPerRequestUs.floor!.join(', ')}), ${p} ${med(o.cpuPerRequestUs[p]!)} µs (${o.cpuPerRequestUs[p]!.join(', ')}): ` +
              `floor / ${p} **${med(cpu)}** (rounds: ${cpu.join(', ')}), the throughput ratio when each proxy is the bottleneck`,
          ]
        : []),
      `- ${p}, concurrency 1: ${p} mean − floor mean **${own1} ms** (rounds: ${o.ownShare1Ms[p]!.join(', ')}; target ≤ 0.2 ms) — ${own1 <= 0.2 ? 'met' : 'not met'}`,
    );
  }
  if (o.profile) {
    const groups = [...new Set(Object.values(o.profile.perRequestUs).flatMap((g) => g.map((x) => x.group)))];
    const keys = Object.keys(o.profile.perRequestUs);
    const us = (k: string, g: string) => o.profile!.perRequestUs[k]!.find((x) => x.group === g)?.us ?? 0;
    const total = (k: string) => o.profile!.perRequestUs[k]!.reduce((s, x) => s + x.us, 0);
    groups.sort((a, b) => us(keys.at(-1)!, b) - us(keys.at(-1)!, a));
    lines.push(
      '',
      `CPU per request at concurrency 64 (V8 sampling profiler, self time by part, µs per request; round-robin windows summed, ${keys.map((k) => `${k} ${o.profile!.requests[k]} requests`).join(', ')}):`,
      '',
      `| part | ${keys.join(' | ')} |`,
      `|---|${keys.map(() => '---:').join('|')}|`,
      ...groups.map((g) => `| ${g} | ${keys.map((k) => us(k, g)).join(' | ')} |`),
      `| **total** | ${keys.map((k) => `**${total(k)}**`).join(' | ')} |`,
    );
  }
  return lines.join('\n');
}
