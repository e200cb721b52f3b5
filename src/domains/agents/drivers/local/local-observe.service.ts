/**
 * What the local driver reports about a running agent without touching it (its logs() and
 * stats(), see local.driver.ts): the newest lines of the runtime's log file, and the process
 * tree's CPU, memory and uptime from /proc plus the runtime's own counters (logs/stats.json).
 * The runtime's files are the agent's: they are opened through confined descriptors (no link
 * followed, a regular file of the agent's own user, never a FIFO: src/lib/confined-fs.ts); the
 * process's own output is in the platform's folder.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { type Confinement, readConfinedText, tailConfinedLines } from '../../../../lib/confined-fs.ts';
import { type AgentStats, type ContainerStatus, idleStats, type LogLine } from '../driver.contract.ts';
import { cpuPercent, memoryPercentOfTotal, type TreeUsage, treeUsage } from './containment/proc.service.ts';

const LEVELS: Record<number, LogLine['level']> = { 10: 'debug', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'error' };

/** The last `maxBytes` of a platform-owned file, split into complete lines. */
function tailLines(file: string, maxBytes = 1024 * 1024): string[] {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return [];
  }
  try {
    const size = fstatSync(fd).size;
    const start = Math.max(0, size - maxBytes);
    const buf = Buffer.alloc(size - start);
    readSync(fd, buf, 0, buf.length, start);
    const lines = buf.toString('utf8').split('\n');
    if (start > 0) lines.shift(); // partial first line
    return lines.filter((l) => l.trim() !== '');
  } finally {
    closeSync(fd);
  }
}

/**
 * logs(): the newest `limit` lines, oldest first; `level` keeps that level only. The built-in
 * runtime writes JSON lines (logs/runtime.log); OpenClaw's own stdout (logs/process.log, and
 * process.log.1 when it was just rotated) is shown as it is, its level guessed from the words in it.
 */
export async function readAgentLogs(
  files: { workspace: Confinement; processLog: string },
  runtimeKind: 'builtin' | 'openclaw',
  startedAt: string | undefined,
  opts: { limit: number; level?: string },
): Promise<LogLine[]> {
  const limit = Math.max(0, Math.floor(opts.limit));
  const level = opts.level?.toLowerCase();
  const lines: LogLine[] = [];
  if (runtimeKind === 'builtin') {
    for (const raw of await tailConfinedLines(files.workspace, ['logs', 'runtime.log'])) {
      try {
        const o = JSON.parse(raw) as { level?: number; time?: number; msg?: string; source?: string };
        lines.push({
          timestamp: new Date(o.time ?? 0).toISOString(),
          level: LEVELS[o.level ?? 30] ?? 'info',
          message: o.msg ?? '',
          source: o.source ?? 'runtime',
        });
      } catch {
        /* a torn last line */
      }
    }
  } else {
    const at = startedAt ?? new Date().toISOString();
    // right after a rotation (agent-disk.service.ts) the newest lines before it are in process.log.1
    const current = tailLines(files.processLog);
    const older = current.length < limit ? tailLines(`${files.processLog}.1`) : [];
    for (const raw of [...older, ...current]) {
      const lvl = /\b(error|fatal)\b/i.test(raw) ? 'error' : /\bwarn/i.test(raw) ? 'warn' : /\bdebug\b/i.test(raw) ? 'debug' : 'info';
      lines.push({ timestamp: at, level: lvl, message: raw, source: 'openclaw' });
    }
  }
  const filtered = level ? lines.filter((l) => l.level === level) : lines;
  return limit === 0 ? [] : filtered.slice(-limit);
}

/**
 * stats(): cpu (% of one core, two /proc samples ≥ 250 ms apart; the previous sample is reused
 * for a minute), resident memory and uptime of the process tree, memoryPercent of the machine,
 * pids = tasks (threads) of the tree, and the runtime's counters from logs/stats.json.
 */
export function createStatsReader() {
  const cpuSamples = new Map<number, TreeUsage>();
  return {
    forget: (pid: number) => cpuSamples.delete(pid),
    async read(workspace: Confinement, pid: number | undefined, current: ContainerStatus, known: boolean): Promise<AgentStats> {
      const base = idleStats(current);
      if (!known) return base;
      // missing until the runtime writes it (OpenClaw has none); refused when it is not a plain file of the agent's
      const text = await readConfinedText(workspace, ['logs', 'stats.json'], 64 * 1024).catch(() => undefined);
      if (text !== undefined) {
        try {
          const counters = JSON.parse(text) as {
            messagesProcessed: number;
            messagesFailed: number;
            averageResponseTimeMs: number;
            network: { rxBytes: number; txBytes: number };
          };
          base.messagesProcessed = counters.messagesProcessed;
          base.messagesFailed = counters.messagesFailed;
          base.averageResponseTimeMs = counters.averageResponseTimeMs;
          base.network = counters.network;
        } catch {
          /* a torn write or a file the agent filled with something else */
        }
      }
      if (!pid) return base;
      let first = cpuSamples.get(pid);
      if (!first || Date.now() - first.at > 60_000) {
        first = treeUsage(pid);
        await new Promise((r) => setTimeout(r, 250));
      }
      const now = treeUsage(pid);
      if (!now) return base;
      cpuSamples.set(pid, now);
      return {
        ...base,
        cpu: first ? cpuPercent(first, now) : 0,
        memory: now.rssBytes,
        memoryPercent: memoryPercentOfTotal(now.rssBytes),
        uptime: Math.round(now.uptimeSeconds),
        pids: now.threads,
      };
    },
  };
}
