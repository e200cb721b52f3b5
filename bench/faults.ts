/**
 * `npm run bench:faults [-- --only postgres,redis,backend] [--down 10] [--steady 10] [--scale 0.5]`:
 * faults under steady mixed load (bench/lib/mixed.ts), one after the other, on the platform run
 * as two processes (`npm start -- backend` and `npm start -- web`) with its own PostgreSQL, Redis
 * and model upstream, so killing them touches nobody else.
 *
 * - postgres: the postmaster is killed (SIGKILL) and started again `--down` seconds later on the
 *   same data. While it is down requests must fail fast (bounded by FAIL_FAST_MS) with a JSON
 *   error, never hang; after it is back the platform must answer again without being restarted.
 * - redis: redis-server is killed and started again. Requests keep succeeding (rate limits fall
 *   back to per-process counters) and the platform writes to Redis again once it is back.
 * - backend: a new agent is provisioned; once a worker has taken its deployment job and launched
 *   the agent's runtime process, the backend process is killed (SIGKILL) and a new one started. The job must be taken again and the
 *   agent end up running, with one deployment row and one runtime process.
 * Every config save acknowledged with 2xx during the run is checked in the database at the end.
 * Failures (5xx, refused, no answer in 10 s) count only inside the declared window of a fault
 * (from the fault until the platform answers again); anywhere else they fail the run.
 * Prints markdown and writes bench/results/faults.json; exits 1 on a failed check.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { agentProcesses, deploymentsOf, recoveredAt, redisCommand, startProbe, waitDeploymentRunning } from './lib/fault-probes.ts';
import { describeMachine, machineLine } from './lib/machine.ts';
import {
  type Credentials,
  checkConfigWrites,
  makeCredentials,
  mixedRoutes,
  runLoad,
  type Stack,
  startStack,
  waitAgentRunning,
} from './lib/mixed.ts';
import { failuresOutside, isServerFailure, routeTable, summarise, type Window } from './lib/mixed-report.ts';
import { writeJson } from './lib/report.ts';
import { benchDir } from './lib/stack.ts';

const { values } = parseArgs({
  options: {
    only: { type: 'string', default: 'postgres,redis,backend' },
    down: { type: 'string', default: '10' },
    steady: { type: 'string', default: '10' },
    scale: { type: 'string', default: '0.5' },
    keep: { type: 'boolean' },
  },
});
const phases = values.only.split(',').map((s) => s.trim());
for (const p of phases)
  if (!['postgres', 'redis', 'backend'].includes(p)) throw new Error(`unknown fault ${p}: postgres, redis or backend`);
const downMs = Number(values.down) * 1000;
const steadyMs = Number(values.steady) * 1000;
const scale = Number(values.scale);
/** a request while PostgreSQL is down must be answered within this */
const FAIL_FAST_MS = Number(process.env.BENCH_FAIL_FAST_MS ?? 2000);
/** the platform must answer again within this after the service is back */
const RECOVERY_MS = Number(process.env.BENCH_RECOVERY_MS ?? 30_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const statusCounts = (xs: { status: unknown }[]) => {
  const out: Record<string, number> = {};
  for (const x of xs) out[String(x.status)] = (out[String(x.status)] ?? 0) + 1;
  return out;
};

type PhaseResult = { name: string; checks: Record<string, boolean>; figures: Record<string, unknown>; markdown: string };

async function postgresPhase(stack: Stack, c: Credentials, load: ReturnType<typeof runLoad>, windows: Window[]): Promise<PhaseResult> {
  const pids = Object.values(stack.processes).map((p) => p.pid);
  const probe = startProbe(`${stack.web}/api/keys`, { headers: { cookie: c.cookies[0]! } });
  await sleep(1000);
  const tKill = Date.now();
  await stack.pg.kill();
  await sleep(downMs);
  const tStart = Date.now();
  await stack.pg.start();
  const tUp = Date.now();
  const deadline = tUp + RECOVERY_MS;
  while (Date.now() < deadline && !probe.results.slice(-4).every((r) => r.t > tUp && r.status === 200)) await sleep(100);
  const recovered = recoveredAt(probe.results, tUp, (r) => r.status === 200);
  await sleep(steadyMs);
  await probe.stop();
  const tEnd = Date.now();
  windows.push({ name: 'postgres', from: tKill, to: (recovered ?? tEnd) + 2000 });

  const down = probe.results.filter((r) => r.t >= tKill + 200 && r.t + r.ms < tStart);
  const downTicks = summarise(load.ticks, tKill + 1000, tStart);
  const hangs = downTicks.reduce((s, r) => s + (r.status.TIMEOUT ?? 0), 0);
  const maxMs = Math.max(0, ...down.map((r) => r.ms));
  // every route answers 2xx again once the platform is back (a sign-in refused 429 would mean the
  // outage was counted as failed sign-in attempts)
  const afterTicks = summarise(load.ticks, (recovered ?? tEnd) + 3000, tEnd);
  const stillRefused = afterTicks.filter((r) => Object.keys(r.status).some((k) => !k.startsWith('2')));
  const sameProcesses = Object.values(stack.processes).every((p) => pids.includes(p.pid) && p.proc.exitCode === null);
  const figures = {
    downS: (tStart - tKill) / 1000,
    restartMs: tUp - tStart,
    probeWhileDown: { count: down.length, status: statusCounts(down), maxMs, allJsonErrors: down.every((r) => r.jsonError) },
    recoveryMsAfterUp: recovered === undefined ? null : recovered - tUp,
    loadWhileDown: downTicks,
    loadAfterRecovery: afterTicks,
  };
  const checks = {
    failsFast: down.length > 0 && maxMs <= FAIL_FAST_MS && hangs === 0,
    jsonErrors: down.every((r) => r.jsonError),
    answers503: down.length > 0 && down.every((r) => r.status === 503),
    recovers: recovered !== undefined && recovered - tUp <= RECOVERY_MS,
    notRestarted: sameProcesses,
    allRoutes2xxAfterRecovery: afterTicks.length > 0 && stillRefused.length === 0,
  };
  const markdown = [
    `**PostgreSQL killed** (SIGKILL of the postmaster) for ${figures.downS} s, then started again on the same data (${figures.restartMs} ms to ready).`,
    '',
    `- probe \`GET /api/keys\` every 250 ms while down: ${down.length} answers, ${JSON.stringify(figures.probeWhileDown.status)}, ` +
      `slowest ${maxMs} ms (bound ${FAIL_FAST_MS}), JSON error body: ${figures.probeWhileDown.allJsonErrors ? 'all' : 'NOT all'}`,
    `- load while down (requests that got no answer in 10 s: ${hangs}):`,
    '',
    routeTable(downTicks),
    '',
    `- answering again ${recovered === undefined ? `**not within ${RECOVERY_MS / 1000} s**` : `${recovered - tUp} ms`} after PostgreSQL was ready, ` +
      `same platform processes: ${sameProcesses ? 'yes' : '**no**'}`,
    `- load from 3 s after that until the end of the phase${stillRefused.length ? ' (**not every route answers 2xx**)' : ''}:`,
    '',
    routeTable(afterTicks),
  ].join('\n');
  return { name: 'postgres', checks, figures, markdown };
}

async function redisPhase(stack: Stack, load: ReturnType<typeof runLoad>): Promise<PhaseResult> {
  const tStop = Date.now();
  await stack.redis.stop();
  await sleep(downMs);
  const tStart = Date.now();
  await stack.redis.start();
  const tUp = Date.now();
  // a fresh redis-server is empty: keys appear when the platform writes its counters there again
  let backAt: number | undefined;
  while (Date.now() < tUp + RECOVERY_MS) {
    const n = await redisCommand(stack.redis.url, 'DBSIZE');
    if (n && n !== ':0') {
      backAt = Date.now();
      break;
    }
    await sleep(100);
  }
  await sleep(steadyMs);
  const downTicks = summarise(load.ticks, tStop + 1000, tStart);
  const failures = downTicks.reduce((s, r) => s + Object.entries(r.status).reduce((a, [k, n]) => a + (isServerFailure(k) ? n : 0), 0), 0);
  const figures = {
    downS: (tStart - tStop) / 1000,
    loadWhileDown: downTicks,
    failuresWhileDown: failures,
    redisWrittenAgainMs: backAt ? backAt - tUp : null,
  };
  const checks = { keepsServing: failures === 0 && downTicks.every((r) => (r.status['200'] ?? 0) > 0), recovers: backAt !== undefined };
  const markdown = [
    `**Redis killed** (SIGKILL of redis-server) for ${figures.downS} s, then started again (empty).`,
    '',
    `- load while down: ${failures} server failures`,
    '',
    routeTable(downTicks),
    '',
    `- the platform wrote to Redis again ${backAt ? `${backAt - tUp} ms` : `**not within ${RECOVERY_MS / 1000} s**`} after it was back`,
  ].join('\n');
  return { name: 'redis', checks, figures, markdown };
}

async function backendPhase(stack: Stack, windows: Window[]): Promise<PhaseResult> {
  // a fresh account: its first agent's deployment is the job the kill interrupts
  const email = `fault${Date.now()}@example.com`;
  const post = (path: string, body: unknown, cookie?: string) =>
    fetch(`${stack.web}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(cookie ? { cookie } : {}) },
      body: JSON.stringify(body),
    });
  await post('/api/register', { email, password: 'bench-password-long-enough', name: 'Fault' });
  const login = await post('/api/auth/login', { email, password: 'bench-password-long-enough' });
  const cookie = /service-session=[^;]+/.exec(login.headers.get('set-cookie') ?? '')![0];
  const provision = await post('/api/agents/provision', { name: 'Fault' }, cookie);
  if (!provision.ok) throw new Error(`provision answered ${provision.status}: ${await provision.text()}`);
  const agentId = ((await provision.json()) as { agent: { id: string } }).agent.id;
  const taken = await waitDeploymentRunning(stack.pg.superuserUrl, agentId, 30_000);
  // the hardest moment: the runtime is launched (it outlives the backend) but not yet reported
  // running, so the next backend must adopt or replace it, never start a second one
  for (const until = Date.now() + 15_000; Date.now() < until && agentProcesses(agentId).length === 0; ) await sleep(10);
  const tKill = Date.now();
  await stack.processes.backend!.stop('SIGKILL');
  const processesAtKill = agentProcesses(agentId).length;
  await stack.startApp('backend');
  const tUp = Date.now();
  let runningAt: number | undefined;
  let error: string | undefined;
  try {
    await waitAgentRunning(stack, cookie, agentId, 120_000);
    runningAt = Date.now();
  } catch (err) {
    error = (err as Error).message;
  }
  windows.push({ name: 'backend', from: tKill, to: tUp + 2000 });
  await sleep(2000); // a second runtime started by mistake would show by now
  const rows = await deploymentsOf(stack.pg.superuserUrl, agentId);
  const procs = agentProcesses(agentId);
  const figures = {
    agentId,
    takenBy: taken.locked_by,
    processesAtKill,
    newBackendReadyMs: tUp - tKill,
    runningMsAfterKill: runningAt ? runningAt - tKill : null,
    error,
    deployments: rows,
    runtimeProcesses: procs.length,
  };
  const checks = {
    retaken: rows.some((r) => r.status === 'succeeded' && r.locked_by !== taken.locked_by),
    agentRunning: runningAt !== undefined,
    oneDeploymentRow: rows.length === 1,
    oneRuntimeProcess: procs.length === 1,
  };
  const markdown = [
    `**Backend killed mid-deployment**: a new agent's deployment job was taken (attempt ${taken.attempts}); the backend process got SIGKILL at once ` +
      `(${processesAtKill} runtime process of that agent existed then) and a new backend was ready ${tUp - tKill} ms later.`,
    '',
    `- agent running ${runningAt ? `${((runningAt - tKill) / 1000).toFixed(1)} s after the kill` : `**no**: ${error}`} ` +
      `(the lease of a killed worker's job expires after 30 s, then the next poll takes it)`,
    `- deployment rows: ${rows.map((r) => `${r.status} after ${r.attempts} attempts${r.locked_by === taken.locked_by ? ' (by the killed worker)' : ''}`).join('; ')}`,
    `- runtime processes of the agent afterwards: ${procs.length}`,
  ].join('\n');
  return { name: 'backend', checks, figures, markdown };
}

const machine = describeMachine();
const work = benchDir('faults');
let stack: Stack | undefined;
let failed = false;
try {
  console.log(`platform (web and backend processes) and its services in ${work.dir}`);
  stack = await startStack(work.dir, true);
  const creds = await makeCredentials(stack, 4);
  const routes = mixedRoutes(stack, creds, scale);
  const load = runLoad(routes, 3600);
  const windows: Window[] = [];
  const results: PhaseResult[] = [];
  const tLoad = Date.now();
  await sleep(steadyMs);
  for (const phase of phases) {
    console.log(`fault: ${phase}`);
    if (phase === 'postgres') results.push(await postgresPhase(stack, creds, load, windows));
    if (phase === 'redis') results.push(await redisPhase(stack, load));
    if (phase === 'backend') results.push(await backendPhase(stack, windows));
    console.log(JSON.stringify(results.at(-1)!.checks));
    await sleep(steadyMs);
  }
  load.stop();
  const done = await load.done;
  const outside = failuresOutside(load.ticks, windows);
  const writes = await checkConfigWrites(stack.pg.superuserUrl, creds.userIds, done.acks['POST /api/config'] ?? []);
  const overall = { noFailuresOutsideWindows: outside.length === 0, noLostWrites: writes.lost.length === 0 };
  failed = !Object.values(overall).every(Boolean) || results.some((r) => !Object.values(r.checks).every(Boolean));
  const failedChecks = results.flatMap((r) =>
    Object.entries(r.checks)
      .filter(([, v]) => !v)
      .map(([k]) => `${r.name}.${k}`),
  );
  const fmtChecks = (c: Record<string, boolean>) =>
    Object.entries(c)
      .map(([k, v]) => `${k} ${v ? 'yes' : '**NO**'}`)
      .join(', ');
  writeJson(join(import.meta.dirname, 'results', 'faults.json'), {
    machine,
    settings: { phases, downMs, steadyMs, scale, FAIL_FAST_MS, RECOVERY_MS },
    phases: results.map(({ markdown: _, ...r }) => r),
    windows: windows.map((w) => ({ ...w, from: w.from - tLoad, to: w.to - tLoad })),
    outside,
    configWrites: writes,
    overall,
  });
  const markdown = [
    `Machine: ${machineLine(machine)}`,
    '',
    `Command: \`npm run bench:faults -- --only ${phases.join(',')} --down ${downMs / 1000} --steady ${steadyMs / 1000} --scale ${scale}\`; ` +
      `load during the whole run: ${routes.map((r) => `${r.name} ×${r.concurrency}`).join(', ')}.`,
    '',
    ...results.flatMap((r) => [r.markdown, '', `Checks: ${fmtChecks(r.checks)}.`, '']),
    `Whole run: ${summarise(load.ticks).reduce((s, r) => s + r.count, 0)} requests; server failures outside the fault windows: ` +
      `${outside.reduce((s, f) => s + f.n, 0)}${outside.length ? ` (first: ${JSON.stringify(outside[0])})` : ''}; ` +
      `acknowledged config saves found in the database: ${writes.checked - writes.lost.length}/${writes.checked} users` +
      `${writes.lost.length ? ` — **lost: ${JSON.stringify(writes.lost)}**` : ''}. Result: **${failed ? 'FAIL' : 'pass'}** (${fmtChecks(overall)}${
        failedChecks.length ? `; failed phase checks: ${failedChecks.join(', ')}` : ''
      }).`,
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
