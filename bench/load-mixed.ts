/**
 * `npm run bench:load [-- --duration 600] [--scale 1]`: mixed load on the platform started as
 * `npm start` starts it (one process, both apps), on its own PostgreSQL, Redis and model upstream
 * (bench/lib/stack.ts): session reads, sign-ins, key listing, config saves, AI chat on the
 * upstream and chat with a local agent through the authenticated proxy, all at once for
 * `--duration` seconds (bench/lib/mixed.ts). Resident memory of the platform process is sampled
 * every 10 s.
 *
 * Passes when no request got a 5xx, a refused connection or no answer within 10 s; every
 * acknowledged config save is in the database afterwards; and resident memory over the second
 * half grows by less than BENCH_RSS_SLOPE_MAX MB per minute (default 3: 15 MB over the last 5 minutes of the 10-minute run, about 4 % of the resident size; the 10 s samples vary by ±10 MB, so a tighter bound would fail on noise). Prints the figures as
 * markdown and writes them to bench/results/load-mixed.json; exits 1 on a failed check.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { describeMachine, machineLine } from './lib/machine.ts';
import { checkConfigWrites, makeCredentials, mixedRoutes, runLoad, type Stack, startStack } from './lib/mixed.ts';
import { failuresOutside, routeTable, slopeMbPerMin, summarise } from './lib/mixed-report.ts';
import { round, writeJson } from './lib/report.ts';
import { benchDir } from './lib/stack.ts';

const { values } = parseArgs({
  options: { duration: { type: 'string', default: '600' }, scale: { type: 'string', default: '1' }, keep: { type: 'boolean' } },
});
const durationS = Number(values.duration);
const scale = Number(values.scale);
if (!(durationS > 0) || !(scale > 0)) throw new Error('--duration and --scale must be positive numbers');
const slopeMax = Number(process.env.BENCH_RSS_SLOPE_MAX ?? 3);
const SAMPLE_MS = 10_000;

const machine = describeMachine();
const work = benchDir('load-mixed');
let stack: Stack | undefined;
let failed = false;
try {
  console.log(`platform and its services in ${work.dir}`);
  stack = await startStack(work.dir, false);
  const creds = await makeCredentials(stack, 8);
  const routes = mixedRoutes(stack, creds, scale);
  const platform = stack.processes.all!;
  console.log(`load: ${routes.map((r) => `${r.name} ×${r.concurrency}`).join(', ')} for ${durationS} s`);

  const started = Date.now();
  const rss: { t: number; mb: number }[] = [];
  const sample = () => {
    const mb = platform.rssMb();
    if (mb !== undefined) rss.push({ t: Date.now(), mb });
  };
  sample();
  const sampler = setInterval(() => {
    sample();
    const last = rss.at(-1);
    console.log(`${Math.round((Date.now() - started) / 1000)} s: platform RSS ${last ? round(last.mb, 1) : '?'} MB`);
  }, SAMPLE_MS);
  const load = runLoad(routes, durationS);
  const done = await load.done;
  clearInterval(sampler);
  sample();

  const rows = summarise(load.ticks);
  const failures = failuresOutside(load.ticks, []);
  const writes = await checkConfigWrites(stack.pg.superuserUrl, creds.userIds, done.acks['POST /api/config'] ?? []);
  const half = started + (durationS * 1000) / 2;
  const secondHalf = rss.filter((s) => s.t >= half);
  const slope = slopeMbPerMin(secondHalf);
  const total = rows.reduce((s, r) => s + r.count, 0);
  const checks = {
    noServerFailures: failures.length === 0,
    noLostWrites: writes.lost.length === 0,
    memoryFlat: Number.isFinite(slope) && slope < slopeMax,
  };
  failed = !Object.values(checks).every(Boolean);
  const results = {
    machine,
    durationS,
    scale,
    routes: rows,
    failures,
    configWrites: writes,
    rssMb: rss.map((s) => ({ s: Math.round((s.t - started) / 1000), mb: round(s.mb, 1) })),
    rssSlopeSecondHalfMbPerMin: round(slope, 3),
    slopeMax,
    checks,
  };
  writeJson(join(import.meta.dirname, 'results', 'load-mixed.json'), results);
  const markdown = [
    `Machine: ${machineLine(machine)}`,
    '',
    `Command: \`npm run bench:load -- --duration ${durationS}${scale !== 1 ? ` --scale ${scale}` : ''}\`. ${total} requests in ${durationS} s ` +
      `(${round(total / durationS, 0)} req/s), closed-loop workers in a child process (one request after the other per worker).`,
    '',
    routeTable(rows),
    '',
    `- 5xx, refused connections or no answer within 10 s: **${failures.reduce((s, f) => s + f.n, 0)}**${failures.length ? ` (first: ${JSON.stringify(failures[0])})` : ''}`,
    `- config saves acknowledged and found in the database: ${writes.checked - writes.lost.length}/${writes.checked} users' last acknowledged save` +
      (writes.lost.length ? ` — **lost: ${JSON.stringify(writes.lost)}**` : ''),
    `- platform resident memory (sampled every 10 s): ${round(rss[0]?.mb ?? NaN, 1)} MB at start, ${round(rss.at(-1)?.mb ?? NaN, 1)} MB at the end, ` +
      `max ${round(Math.max(...rss.map((s) => s.mb)), 1)} MB; slope over the second half **${round(slope, 2)} MB/min** (bound ${slopeMax})`,
    `- result: **${failed ? 'FAIL' : 'pass'}** (${Object.entries(checks)
      .map(([k, v]) => `${k} ${v ? 'yes' : 'NO'}`)
      .join(', ')})`,
  ].join('\n');
  console.log(`\n${markdown}`);
} catch (err) {
  failed = true;
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
} finally {
  await stack?.close().catch((err) => console.error('stopping the stack:', err));
  if (!values.keep) work.remove();
}
process.exit(failed ? 1 : 0);
