/**
 * Each local agent's disk (docs/agents.md "Disk", docs/security.md "What the platform does in an
 * agent's directories"): its workspace, home and process.log sit on DATA_DIR's filesystem, next to
 * PostgreSQL's data, so one agent must not be able to fill it.
 *
 * - Every process of the agent runs with RLIMIT_FSIZE = its quota (`prlimit` at the launch): no
 *   single file it writes, process.log included (its stdout is that file), grows past it; the kernel
 *   answers EFBIG (and SIGXFSZ, which Node ignores).
 * - While it runs, the driver measures workspace + home + its logs folder with `du` in a child
 *   process (a bounded walk: never follows a link, stays on one filesystem, stopped at a timeout)
 *   every LIMITS.agentDiskCheckIntervalMs, and records the answer in the platform's own folder
 *   (disk-usage.json, read by the file explorer of either app). Over the quota (or not measurable in
 *   time), the agent's processes get RLIMIT_FSIZE 0 with prlimit(2): nothing of theirs grows any
 *   more, while deleting, truncating and rewriting in place still work, so the agent (or its owner,
 *   through the explorer's writes that make a file smaller) can get back under; the next measure
 *   that finds it under gives the limit back (in place where the platform has CAP_SYS_RESOURCE,
 *   else by starting the agent again). Each crossing is logged once, and written into process.log
 *   for the owner to see.
 * - process.log (the platform's file, in the platform's folder: the agent can neither see nor
 *   replace it) is rotated while the agent runs, every LIMITS.processLogCheckIntervalMs: once larger
 *   than LIMITS.processLogMaxBytes its newest part is copied to process.log.1 and it is truncated
 *   (copytruncate: the agent holds it open with O_APPEND, so its next line lands at the new end; a
 *   line written between the copy and the truncation is lost).
 * What it does not bound: the number of files (inodes) an agent creates empty, and how far it can
 * go past the quota between two measures (at most one file's worth per file it writes).
 */
import { execFile } from 'node:child_process';
import { constants, type Stats } from 'node:fs';
import { type FileHandle, open, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LIMITS } from '../../../../../config/limits.ts';
import { planResources } from '../../agent-env.rules.ts';
import { isAlive } from './proc.service.ts';
import { findOnPath } from './sandbox.service.ts';

const MB = 1024 * 1024;

/** The agent's quota in bytes: the operator's AGENT_DISK_QUOTA_MB, else its plan's. */
export function diskQuotaBytes(plan: string | undefined, operatorMb: number | undefined): number {
  const mb = operatorMb ?? LIMITS.agentDiskQuotaMb[planResources(plan).plan] ?? LIMITS.agentDiskQuotaDefaultMb;
  return mb * MB;
}

/** What the last measure found (DATA_DIR/agents/<id>/disk-usage.json). */
export type DiskUsage = {
  /** bytes on disk (blocks, as du counts them); null when the measure did not finish in time */
  usedBytes: number | null;
  quotaBytes: number;
  /** over the quota, or not measurable: the agent's files cannot grow until a measure finds it under */
  over: boolean;
  measuredAt: string;
};

/** `prlimit --fsize=N:N --` in front of a command (every process it starts inherits the limit); unchanged without prlimit. */
export function withFileSizeLimit(
  prlimit: string | undefined,
  bytes: number,
  file: string,
  args: string[],
): { file: string; args: string[] } {
  if (!prlimit) return { file, args };
  return { file: prlimit, args: [`--fsize=${bytes}:${bytes}`, '--', file, ...args] };
}

export const findPrlimit = () => findOnPath('prlimit');

/**
 * du's total for `dirs` in bytes, or null when it does not finish within `timeoutMs`. du never
 * follows a symbolic link (-P is its default), stays on each folder's filesystem (-x) and counts a
 * hard-linked file once; a file that vanishes during the walk is skipped (its exit status is then 1,
 * the total is still printed).
 */
export function measureDisk(dirs: string[], timeoutMs: number): Promise<number | null> {
  return new Promise((resolve) => {
    execFile(
      'du',
      ['-s', '-x', '-c', '-B1', '--', ...dirs],
      { timeout: timeoutMs, killSignal: 'SIGKILL', env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' }, maxBuffer: 64 * 1024 },
      (err, stdout) => {
        if (err && (err as { killed?: boolean }).killed) return resolve(null);
        const total = /^(\d+)\ttotal$/m.exec(stdout);
        resolve(total ? Number(total[1]) : null);
      },
    );
  });
}

const run = (file: string, args: string[]) =>
  new Promise<boolean>((resolve) => {
    execFile(file, args, { timeout: 5_000, env: { PATH: '/usr/bin:/bin' } }, (err) => resolve(!err));
  });

/**
 * Sets RLIMIT_FSIZE (soft and hard) of each running process; whether every one that still exists
 * took it. The kernel lets the platform do it directly with CAP_SYS_RESOURCE (root on a host), or
 * for processes of its own uid (bwrap's); a container usually drops that capability, so a process
 * of the agent's uid is then given the lower limit by a prlimit running as that same uid (`asUser`,
 * through setpriv: same uid, nothing else), which the kernel allows. Raising a hard limit again
 * needs the capability: without it this answers false and the caller restarts the agent instead.
 */
export async function setFileSizeLimit(
  prlimit: string,
  pids: number[],
  bytes: number,
  asUser?: { setpriv: string; uid: number } | undefined,
): Promise<boolean> {
  const args = (pid: number) => ['--pid', String(pid), `--fsize=${bytes}:${bytes}`];
  const outcomes = await Promise.all(
    pids.map(async (pid) => {
      if (await run(prlimit, args(pid))) return true;
      if (
        asUser &&
        (await run(asUser.setpriv, [`--reuid=${asUser.uid}`, `--regid=${asUser.uid}`, '--clear-groups', '--', prlimit, ...args(pid)]))
      )
        return true;
      return !isAlive(pid); // gone meanwhile: nothing left to limit
    }),
  );
  return outcomes.every(Boolean);
}

const { O_RDWR, O_NOFOLLOW } = constants;

/**
 * process.log larger than `maxBytes`: its newest `maxBytes` (from the first whole line) become
 * process.log.1 and it is truncated to nothing. The folder is the platform's (0700), so the names are
 * ours; the file is still opened without following a link. Returns whether it rotated.
 */
export async function rotateProcessLog(file: string, maxBytes: number): Promise<boolean> {
  let fh: FileHandle;
  try {
    fh = await open(file, O_RDWR | O_NOFOLLOW);
  } catch {
    return false; // no log (yet)
  }
  try {
    const st: Stats = await fh.stat();
    if (!st.isFile() || st.size <= maxBytes) return false;
    const keep = Buffer.allocUnsafe(maxBytes);
    const { bytesRead } = await fh.read(keep, 0, maxBytes, st.size - maxBytes);
    let tail = keep.subarray(0, bytesRead);
    const nl = tail.indexOf(0x0a);
    if (nl >= 0 && nl < tail.length - 1) tail = tail.subarray(nl + 1); // the partial first line
    const tmp = `${file}.1.tmp`;
    await rm(tmp, { force: true });
    await writeFile(tmp, tail, { mode: 0o600, flag: 'wx' });
    await rename(tmp, `${file}.1`);
    await fh.truncate(0);
    return true;
  } finally {
    await fh.close();
  }
}

/** Appends one line of the platform's own to process.log (where the owner reads what happened to the agent). */
export async function noteInProcessLog(file: string, line: string): Promise<void> {
  try {
    const fh = await open(file, constants.O_WRONLY | constants.O_APPEND | O_NOFOLLOW);
    try {
      await fh.write(`[platform] ${new Date().toISOString()} ${line}\n`);
    } finally {
      await fh.close();
    }
  } catch {
    /* no log: the platform's log line is enough */
  }
}

export async function writeDiskUsage(base: string, usage: DiskUsage): Promise<void> {
  const file = join(base, 'disk-usage.json');
  await writeFile(`${file}.tmp`, JSON.stringify(usage), { mode: 0o600 });
  await rename(`${file}.tmp`, file);
}

export const formatMb = (bytes: number) => `${(bytes / MB).toFixed(bytes < 10 * MB ? 1 : 0)} MB`;

export type DiskWatchOptions = {
  /** the agents with a folder here, their folders, and the state file naming their process */
  agentIds(): string[];
  dirs(agentId: string): { base: string; workspace: string; home: string; platformLogs: string };
  /** the quota recorded at the launch, when the agent's process is alive (undefined: not running here) */
  running(agentId: string): { quotaBytes: number } | undefined;
  /** every process of the agent now (its cgroup's, its uid's) */
  processesOf(agentId: string): number[];
  prlimit: string | undefined;
  /** how a prlimit runs as the agent's own uid (sandboxed as root: setpriv and the uid of its state) */
  asAgent(agentId: string): { setpriv: string; uid: number } | undefined;
  /** starts the agent again (its full limit back, where the platform may not raise it in place) */
  restart(agentId: string): Promise<void>;
  log?: ((level: 'info' | 'warn', message: string) => void) | undefined;
  diskCheckIntervalMs?: number | undefined;
  measureTimeoutMs?: number | undefined;
  processLogMaxBytes?: number | undefined;
  processLogCheckIntervalMs?: number | undefined;
};

/** The local driver's two timers: disk measures (and the limit that follows) and process.log rotation. */
export function createDiskWatch(o: DiskWatchOptions) {
  const diskMs = o.diskCheckIntervalMs ?? LIMITS.agentDiskCheckIntervalMs;
  const logMs = o.processLogCheckIntervalMs ?? LIMITS.processLogCheckIntervalMs;
  const logMax = o.processLogMaxBytes ?? LIMITS.processLogMaxBytes;
  const timeoutMs = o.measureTimeoutMs ?? LIMITS.agentDiskMeasureTimeoutMs;
  let diskTimer: NodeJS.Timeout | undefined;
  let logTimer: NodeJS.Timeout | undefined;
  let measuring: Promise<void> | undefined;
  let rotating = false;
  /** agents this process found over their quota (their processes limited to 0) */
  const limited = new Set<string>();

  const processLog = (agentId: string) => join(o.dirs(agentId).platformLogs, 'process.log');

  /** What the last measure recorded (either app's process reads it), undefined before the first. */
  async function usage(agentId: string): Promise<DiskUsage | undefined> {
    try {
      const fh = await open(join(o.dirs(agentId).base, 'disk-usage.json'), constants.O_RDONLY | O_NOFOLLOW);
      try {
        return JSON.parse(await fh.readFile('utf8')) as DiskUsage;
      } finally {
        await fh.close();
      }
    } catch {
      return undefined;
    }
  }

  /** Measures one running agent, records it, and limits or frees its processes. */
  async function check(agentId: string): Promise<DiskUsage | undefined> {
    const running = o.running(agentId);
    if (!running) return undefined;
    const d = o.dirs(agentId);
    // limited by this process, or by the previous platform process (its processes outlived it with the limit)
    const wasOver = limited.has(agentId) || (await usage(agentId))?.over === true;
    const usedBytes = await measureDisk([d.workspace, d.home, d.platformLogs], timeoutMs);
    const now: DiskUsage = {
      usedBytes,
      quotaBytes: running.quotaBytes,
      over: usedBytes === null || usedBytes > running.quotaBytes,
      measuredAt: new Date().toISOString(),
    };
    await writeDiskUsage(d.base, now).catch(() => {});
    const what = usedBytes === null ? `could not be measured within ${Math.round(timeoutMs / 1000)} s` : `uses ${formatMb(usedBytes)}`;
    if (now.over) {
      // every measure while over: a process started since the last one may have inherited the old limit
      if (o.prlimit) await setFileSizeLimit(o.prlimit, o.processesOf(agentId), 0, o.asAgent(agentId));
      if (!limited.has(agentId)) {
        limited.add(agentId);
        const line = `agent ${agentId} ${what} of its ${formatMb(running.quotaBytes)} disk quota: its files cannot grow until it is back under (delete or truncate files)`;
        o.log?.('warn', line);
        await noteInProcessLog(processLog(agentId), line);
      }
    } else if (wasOver) {
      limited.delete(agentId);
      const restored = !o.prlimit || (await setFileSizeLimit(o.prlimit, o.processesOf(agentId), running.quotaBytes));
      const line = `agent ${agentId} ${what} of its ${formatMb(running.quotaBytes)} disk quota again: its files may grow again${restored ? '' : ' (restarted: the platform may not raise a limit in place here)'}`;
      o.log?.('info', line);
      await noteInProcessLog(processLog(agentId), line);
      if (!restored) await o.restart(agentId).catch((err: Error) => o.log?.('warn', `agent ${agentId} not restarted: ${err.message}`));
    }
    return now;
  }

  /** One agent after another (a du at a time: the machine is shared with the agents). */
  function measureAll(): Promise<void> {
    measuring ??= (async () => {
      for (const agentId of o.agentIds()) {
        await check(agentId).catch((err: Error) => o.log?.('warn', `agent ${agentId}: disk use not measured: ${err.message}`));
      }
    })().finally(() => {
      measuring = undefined;
    });
    return measuring;
  }

  async function rotateAll(): Promise<void> {
    if (rotating) return;
    rotating = true;
    try {
      for (const agentId of o.agentIds()) {
        if (o.running(agentId)) await rotateProcessLog(processLog(agentId), logMax).catch(() => false);
      }
    } finally {
      rotating = false;
    }
  }

  return {
    start() {
      if (diskTimer) return;
      diskTimer = setInterval(() => void measureAll(), diskMs);
      logTimer = setInterval(() => void rotateAll(), logMs);
      diskTimer.unref();
      logTimer.unref();
      void measureAll();
    },
    async stop() {
      clearInterval(diskTimer);
      clearInterval(logTimer);
      diskTimer = logTimer = undefined;
      await measuring;
    },
    check,
    usage,
    /** The agent starts again, with its whole limit: the next measure limits it again if need be. */
    forget(agentId: string) {
      limited.delete(agentId);
    },
  };
}
