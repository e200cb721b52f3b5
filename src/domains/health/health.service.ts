/**
 * Health of the platform (§4.12): healthy when CPU and memory are both at or below 70%, degraded up
 * to 85%, unhealthy above. The CPU and memory judged are the platform process's own, not the
 * machine's (docs/admin.md "Server health"): on a shared host other programs may keep the CPUs busy
 * while the platform answers at once, and that is not the platform's illness. So:
 * - CPU is the utilisation of the platform's event loop (the share of time it was busy running
 *   JavaScript or native work rather than waiting for I/O) since the previous sample: when it
 *   nears 100% every request waits for the others, whatever the machine's other cores do. The
 *   first sample is taken when the service is created, so the first answer covers the time since
 *   start-up; answers within a second of a sample reuse it, so frequent probes do not shrink the
 *   window to nothing.
 * - Memory is the larger of the JavaScript heap in use against V8's heap limit (past it the
 *   process dies) and the resident memory against the cgroup's memory limit where one is set
 *   (past it the kernel kills the process).
 * The machine's CPU and memory are reported to admins as information, never as a check.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import { LIMITS } from '../../config/limits.ts';

export type Health = 'healthy' | 'degraded' | 'unhealthy';

/** What health is judged by: the platform process's own load. */
export interface SystemMetrics {
  /** percent 0..100: the platform's event loop utilisation */
  cpuPercent(): number;
  /** percent 0..100: the platform's memory against the most it may use */
  memoryPercent(): number;
  /** the machine's CPU and memory, shown as information (default: measured from the OS) */
  host?(): { cpuPercent: number; memoryPercent: number };
}

/** Below this, a sample is answered from the previous one (a probe every few ms must not measure nothing). */
const MIN_WINDOW_MS = 1_000;

/** The cgroup v2 memory limit of this process in bytes, or undefined where none is set. */
function cgroupMemoryLimit(): number | undefined {
  try {
    const raw = readFileSync('/sys/fs/cgroup/memory.max', 'utf8').trim();
    const n = Number(raw);
    return raw !== 'max' && Number.isFinite(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

/** The platform process's CPU (event loop utilisation) and memory. */
export function createPlatformMetrics(): SystemMetrics {
  let last = performance.eventLoopUtilization();
  let lastAt = performance.now();
  let lastPercent = 0;
  const cgroupLimit = cgroupMemoryLimit();
  const host = createHostMetrics();
  return {
    cpuPercent() {
      if (performance.now() - lastAt < MIN_WINDOW_MS && lastPercent > 0) return lastPercent;
      const now = performance.eventLoopUtilization();
      const delta = performance.eventLoopUtilization(now, last);
      last = now;
      lastAt = performance.now();
      lastPercent = Math.min(100, Math.max(0, delta.utilization * 100));
      return lastPercent;
    },
    memoryPercent() {
      const heap = v8.getHeapStatistics();
      const heapPercent = (heap.used_heap_size / heap.heap_size_limit) * 100;
      const rssPercent = cgroupLimit ? (process.memoryUsage.rss() / cgroupLimit) * 100 : 0;
      return Math.min(100, Math.max(heapPercent, rssPercent));
    },
    host: () => host(),
  };
}

/** The machine's CPU (non-idle share of all cores since the previous sample) and memory in use. */
function createHostMetrics(): () => { cpuPercent: number; memoryPercent: number } {
  const totals = () => {
    let idle = 0;
    let total = 0;
    for (const c of os.cpus()) {
      idle += c.times.idle;
      total += c.times.user + c.times.nice + c.times.sys + c.times.irq + c.times.idle;
    }
    return { idle, total };
  };
  let last = totals();
  let lastPercent = 0;
  return () => {
    const t = totals();
    const dTotal = t.total - last.total;
    if (dTotal > 0) {
      lastPercent = Math.min(100, Math.max(0, (1 - (t.idle - last.idle) / dTotal) * 100));
      last = t;
    }
    const total = os.totalmem();
    return { cpuPercent: lastPercent, memoryPercent: total > 0 ? ((total - os.freemem()) / total) * 100 : 0 };
  };
}

export function classify(cpu: number, memory: number): Health {
  return worse(status(cpu), status(memory));
}

const RANK: Record<Health, number> = { healthy: 0, degraded: 1, unhealthy: 2 };
const worse = (a: Health, b: Health): Health => (RANK[a] >= RANK[b] ? a : b);

/** §4.12's thresholds applied to one measure. */
function status(percent: number): Health {
  if (percent > LIMITS.healthUnhealthyAbove) return 'unhealthy';
  if (percent > LIMITS.healthDegradedAbove) return 'degraded';
  return 'healthy';
}

const THRESHOLDS = `degraded above ${LIMITS.healthDegradedAbove}%, unhealthy above ${LIMITS.healthUnhealthyAbove}%`;

export type HealthCheck = { name: 'cpu' | 'memory'; status: Health; percent: number; reason: string };

export function createHealthService(deps: { metrics: SystemMetrics; now?: () => Date }) {
  const now = deps.now ?? (() => new Date());
  const host = deps.metrics.host ? () => deps.metrics.host!() : createHostMetrics();

  /** Each check with its measure and a sentence that says what it measured. */
  function checks(): HealthCheck[] {
    const cpu = deps.metrics.cpuPercent();
    const memory = deps.metrics.memoryPercent();
    return [
      {
        name: 'cpu',
        status: status(cpu),
        percent: round(cpu),
        reason: `the platform's event loop was busy ${round(cpu)}% of the time (${THRESHOLDS})`,
      },
      {
        name: 'memory',
        status: status(memory),
        percent: round(memory),
        reason: `the platform uses ${round(memory)}% of the memory it may use (${THRESHOLDS})`,
      },
    ];
  }

  return {
    /** Public summary for GET /api/health (§4.12: no hardware fields). */
    summary() {
      const c = checks();
      return { health: c.map((x) => x.status).reduce(worse), timestamp: now().toISOString() };
    },
    /** The checks, their reasons, and hardware detail for admins only (GET /api/admin/health). */
    detail() {
      const c = checks();
      const health = c.map((x) => x.status).reduce(worse);
      const failing = c.filter((x) => x.status !== 'healthy');
      const h = host();
      const mem = process.memoryUsage();
      const heap = v8.getHeapStatistics();
      return {
        health,
        reason:
          failing.length === 0
            ? `the platform's CPU and memory are at or below ${LIMITS.healthDegradedAbove}%`
            : failing.map((x) => `${x.name} ${x.status}: ${x.reason}`).join('; '),
        checks: c,
        timestamp: now().toISOString(),
        cpu: { percent: round(h.cpuPercent), cores: os.cpus().length, loadAverage: os.loadavg().map(round) },
        memory: { percent: round(h.memoryPercent), totalBytes: os.totalmem(), freeBytes: os.freemem() },
        process: {
          rssBytes: mem.rss,
          heapUsedBytes: mem.heapUsed,
          heapLimitBytes: heap.heap_size_limit,
          uptimeSeconds: Math.round(process.uptime()),
          node: process.version,
        },
        system: { platform: os.platform(), arch: os.arch(), uptimeSeconds: Math.round(os.uptime()) },
      };
    },
  };
}

const round = (n: number) => Math.round(n * 10) / 10;
export type HealthService = ReturnType<typeof createHealthService>;
