/**
 * Health of this machine (§4.12): healthy when CPU and memory are both at or below 70%,
 * degraded up to 85%, unhealthy above. CPU is the share of non-idle time across all cores since
 * the previous sample; the first sample is taken when the service is created, so the first
 * answer covers the time since start-up, not the machine's whole uptime.
 */
import os from 'node:os';
import { LIMITS } from '../../config/limits.ts';

export type Health = 'healthy' | 'degraded' | 'unhealthy';

export interface SystemMetrics {
  /** percent 0..100 */
  cpuPercent(): number;
  /** percent 0..100 */
  memoryPercent(): number;
}

export function createOsMetrics(): SystemMetrics {
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
  return {
    cpuPercent() {
      const t = totals();
      const dTotal = t.total - last.total;
      const dIdle = t.idle - last.idle;
      last = t;
      return dTotal > 0 ? Math.min(100, Math.max(0, (1 - dIdle / dTotal) * 100)) : 0;
    },
    memoryPercent() {
      const total = os.totalmem();
      return total > 0 ? ((total - os.freemem()) / total) * 100 : 0;
    },
  };
}

export function classify(cpu: number, memory: number): Health {
  const worst = Math.max(cpu, memory);
  if (worst > LIMITS.healthUnhealthyAbove) return 'unhealthy';
  if (worst > LIMITS.healthDegradedAbove) return 'degraded';
  return 'healthy';
}

export function createHealthService(deps: { metrics: SystemMetrics; now?: () => Date }) {
  const now = deps.now ?? (() => new Date());
  return {
    /** Public summary for GET /api/health. */
    summary() {
      const cpu = deps.metrics.cpuPercent();
      const memory = deps.metrics.memoryPercent();
      return { health: classify(cpu, memory), cpu, memory, timestamp: now().toISOString() };
    },
    /** Hardware detail for admins only (GET /api/admin/health). */
    detail() {
      const s = this.summary();
      const mem = process.memoryUsage();
      return {
        ...s,
        cpu: { percent: round(s.cpu), cores: os.cpus().length, loadAverage: os.loadavg().map(round) },
        memory: { percent: round(s.memory), totalBytes: os.totalmem(), freeBytes: os.freemem() },
        process: { rssBytes: mem.rss, heapUsedBytes: mem.heapUsed, uptimeSeconds: Math.round(process.uptime()), node: process.version },
        system: { platform: os.platform(), arch: os.arch(), uptimeSeconds: Math.round(os.uptime()) },
      };
    },
  };
}

const round = (n: number) => Math.round(n * 10) / 10;
export type HealthService = ReturnType<typeof createHealthService>;
