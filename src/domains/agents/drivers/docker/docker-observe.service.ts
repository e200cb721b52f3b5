/**
 * Reading what the Docker Engine says about an agent's container: its §3 status from the inspect
 * output, the published gateway address, the log endpoint's multiplexed stream as LogLines, and
 * one stats sample (stream=false) as AgentStats. Pure functions over the Engine's JSON, so the
 * driver stays about calls and the wire formats are tested on their own.
 */
import type { ContainerInspectInfo, ContainerStats } from 'dockerode';
import type { AgentStats, ContainerStatus, LogLine } from '../driver.contract.ts';

/**
 * §3 values from State: a running container is `running` once its HEALTHCHECK passes (and when it
 * reports unhealthy: whether the gateway answers is the platform's own probe's call, see
 * health-probe.client.ts) and `starting` before; paused (an earlier version's suspend; it now stops the container) is `suspended`.
 */
export function statusOf(info: Pick<ContainerInspectInfo, 'State'>): ContainerStatus {
  const s = info.State;
  if (s.Paused || s.Status === 'paused') return 'suspended';
  if (s.Restarting || s.Status === 'restarting' || s.Status === 'created') return 'starting';
  if (s.Running || s.Status === 'running') return s.Health?.Status === 'starting' ? 'starting' : 'running';
  if (s.Status === 'exited' || s.Status === 'removing' || s.Status === 'stopped') return 'stopped';
  return 'error'; // dead, or a state this driver does not know
}

/** The host port the engine chose for the gateway (empty while the container is not running). */
export function publishedPort(info: Pick<ContainerInspectInfo, 'NetworkSettings'>, portKey: string): string | undefined {
  const bindings = (info.NetworkSettings?.Ports as Record<string, { HostIp: string; HostPort: string }[] | null> | undefined)?.[portKey];
  return bindings?.find((b) => b.HostPort)?.HostPort;
}

/**
 * The log endpoint's framing for a container without a TTY: 8-byte headers
 * `[stream, 0, 0, 0, size (uint32 big-endian)]` before each chunk of stdout (1) or stderr (2).
 * A body that does not start with a valid header is a TTY container's raw output (all stdout).
 */
export function demultiplex(body: Buffer): { stdout: string; stderr: string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let at = 0;
  while (at + 8 <= body.length) {
    const stream = body[at]!;
    if (stream > 2 || body[at + 1] !== 0 || body[at + 2] !== 0 || body[at + 3] !== 0) {
      if (at === 0) return { stdout: body.toString('utf8'), stderr: '' };
      break; // misaligned tail: keep what was framed
    }
    const size = body.readUInt32BE(at + 4);
    const chunk = body.subarray(at + 8, Math.min(body.length, at + 8 + size));
    (stream === 2 ? err : out).push(chunk);
    at += 8 + size;
  }
  return { stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

const LEVELS: LogLine['level'][] = ['debug', 'info', 'warn', 'error'];
const PINO_LEVELS: Record<number, LogLine['level']> = { 10: 'debug', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'error' };
const TIMESTAMPED = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})) (.*)$/;

/**
 * Lines of one stream read with `timestamps=true` (each line starts with the engine's RFC 3339
 * time). JSON lines from the built-in runtime (pino) keep their level and message; other output
 * (OpenClaw's) gets its level guessed from its words, like the local driver does.
 */
function parseStream(text: string, source: 'stdout' | 'stderr'): LogLine[] {
  const lines: LogLine[] = [];
  for (const raw of text.split('\n')) {
    if (raw.trim() === '') continue;
    const m = TIMESTAMPED.exec(raw);
    const at = m ? new Date(m[1]!) : undefined;
    const timestamp = at && !Number.isNaN(at.getTime()) ? at.toISOString() : new Date(0).toISOString();
    const message = m ? m[2]! : raw;
    let line: LogLine | undefined;
    if (message.startsWith('{')) {
      try {
        const o = JSON.parse(message) as { level?: number | string; msg?: string; source?: string };
        const named = typeof o.level === 'string' ? o.level.toLowerCase().replace('warning', 'warn') : undefined;
        const level = typeof o.level === 'number' ? PINO_LEVELS[o.level] : LEVELS.find((l) => l === named);
        if (typeof o.msg === 'string') line = { timestamp, level: level ?? 'info', message: o.msg, source: o.source ?? source };
      } catch {
        /* not JSON after all: shown as it is */
      }
    }
    const guessed = /\b(error|fatal)\b/i.test(message)
      ? 'error'
      : /\bwarn/i.test(message)
        ? 'warn'
        : /\bdebug\b/i.test(message)
          ? 'debug'
          : 'info';
    lines.push(line ?? { timestamp, level: guessed, message, source });
  }
  return lines;
}

/** stdout and stderr lines merged by time (a stable sort keeps each stream's own order). */
export function logLines(body: Buffer): LogLine[] {
  const { stdout, stderr } = demultiplex(body);
  return [...parseStream(stdout, 'stdout'), ...parseStream(stderr, 'stderr')].sort((a, b) => a.timestamp.localeCompare(b.timestamp));
}

const round1 = (n: number) => Math.round(n * 10) / 10;

/**
 * One stats sample → AgentStats. CPU is percent of one core (the docker CLI's formula, like the
 * local driver's); memory excludes the reclaimable page cache (cgroup v1 `total_inactive_file`,
 * v2 `inactive_file`), as `docker stats` shows it.
 */
export function statsOf(sample: ContainerStats, status: ContainerStatus, startedAt: string | undefined): AgentStats {
  const cpuDelta = (sample.cpu_stats?.cpu_usage?.total_usage ?? 0) - (sample.precpu_stats?.cpu_usage?.total_usage ?? 0);
  const systemDelta = (sample.cpu_stats?.system_cpu_usage ?? 0) - (sample.precpu_stats?.system_cpu_usage ?? 0);
  const cpus = sample.cpu_stats?.online_cpus || sample.cpu_stats?.cpu_usage?.percpu_usage?.length || 1;
  const cpu = cpuDelta > 0 && systemDelta > 0 ? round1((cpuDelta / systemDelta) * cpus * 100) : 0;
  const m = sample.memory_stats ?? {};
  const mstats = (m.stats ?? {}) as Record<string, number | undefined>;
  const cache = mstats.total_inactive_file ?? mstats.inactive_file ?? 0;
  const memory = Math.max(0, (m.usage ?? 0) - cache);
  const limit = m.limit ?? 0;
  let rxBytes = 0;
  let txBytes = 0;
  for (const n of Object.values(sample.networks ?? {})) {
    rxBytes += n.rx_bytes ?? 0;
    txBytes += n.tx_bytes ?? 0;
  }
  const since = startedAt ? Date.parse(startedAt) : Number.NaN;
  return {
    cpu,
    memory,
    memoryPercent: limit > 0 ? Math.round((memory / limit) * 10_000) / 100 : 0,
    network: { rxBytes, txBytes },
    uptime: Number.isFinite(since) && since > 0 ? Math.max(0, Math.round((Date.now() - since) / 1000)) : 0,
    pids: sample.pids_stats?.current ?? 0,
    status,
  };
}
