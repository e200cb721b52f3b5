/**
 * The local driver's agent uids (docs/agents.md "Agent uids"). The database numbers each agent once
 * (migration 090: from FIRST_AGENT_UID, unique, never reused); this platform runs agent n as
 * AGENT_UID_BASE + (n - FIRST_AGENT_UID), inside a range of LIMITS.agentUidRange uids. Every
 * platform's database starts at the same number, so two platforms on one host with the same base
 * would run their tenants' agents as the same uids, and per-uid kernel limits (inotify instances,
 * RLIMIT_NPROC, …) would be shared between those tenants. The operator gives each platform its own
 * base; at start-up claimUidRange says when another platform on the host uses the same range.
 */
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { LIMITS } from '../../../../../config/limits.ts';
import { isAlive, processUid, readProcStat } from './proc.service.ts';
import { FIRST_AGENT_UID } from './sandbox.service.ts';

/** Where platforms on this host say which uid range they use: root's (only a platform running as root has uids per agent). */
export const UID_REGISTRY_DIR = '/run/agent-platform/uid-ranges';

/** The OS uid of the agent the database numbered `allocated`, on a platform whose AGENT_UID_BASE is `base`. */
export function agentUid(base: number, allocated: number): number {
  const offset = allocated - FIRST_AGENT_UID;
  if (!Number.isSafeInteger(offset) || offset < 0 || offset >= LIMITS.agentUidRange)
    throw new Error(
      `agent number ${allocated} has no uid: this platform runs agents as the ${LIMITS.agentUidRange} uids from AGENT_UID_BASE=${base}, and the database has numbered more agents than that`,
    );
  return base + offset;
}

/** One platform process's entry in the registry: its range, its DATA_DIR, and the process that holds it. */
type Claim = { pid: number; startTicks: number; base: number; end: number; dataDir: string };

const isClaim = (v: unknown): v is Claim => {
  const c = v as Partial<Claim> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    [c.pid, c.startTicks, c.base, c.end].every((n) => Number.isSafeInteger(n)) &&
    typeof c.dataDir === 'string'
  );
};

/** The claim's process is still the one that wrote it (same pid and kernel start time, so a reused pid does not count). */
const holderAlive = (c: Claim) => isAlive(c.pid) && readProcStat(c.pid)?.startTicks === c.startTicks;

const canonical = (dir: string) => {
  try {
    return realpathSync(dir);
  } catch {
    return resolve(dir);
  }
};

/**
 * Registers this platform's uid range for the host and says whether another platform uses it.
 * Two signs, the first found wins:
 *   - a live entry of another platform in `registryDir` whose range overlaps (processes sharing
 *     this DATA_DIR are this platform: they share its agents' state);
 *   - a process running as a uid of the range that is none of this platform's agents (`ownUids`,
 *     from its state files): another platform's agent, whether or not that platform registers.
 * Returns the log lines (one warning naming the other pid and AGENT_UID_BASE when there is one)
 * and release(), which removes the entry at shutdown; an entry whose process died is removed by
 * the next platform that reads it.
 */
export function claimUidRange(o: { base: number; dataDir: string; ownUids: ReadonlySet<number>; registryDir?: string }): {
  lines: { level: 'info' | 'warn'; message: string }[];
  release(): void;
} {
  const base = o.base;
  const end = base + LIMITS.agentUidRange;
  const dataDir = canonical(o.dataDir);
  const dir = o.registryDir ?? UID_REGISTRY_DIR;
  const range = `${base}–${end - 1}`;
  const lines: { level: 'info' | 'warn'; message: string }[] = [
    { level: 'info', message: `agent uids ${range} (AGENT_UID_BASE=${base}; each platform on a host needs a range of its own)` },
  ];
  const advice = 'agents of both share per-uid kernel limits such as inotify instances: give one of them another AGENT_UID_BASE';

  const registry = openRegistry(dir);
  if (!registry.ok) {
    lines.push({ level: 'warn', message: `agent uids: ${registry.why}, so other platforms on this host using ${range} are not known` });
  }
  const others = registry.ok ? readClaims(dir) : [];
  const clash = others.find((c) => c.dataDir !== dataDir && c.base < end && base < c.end);
  if (clash) {
    lines.push({
      level: 'warn',
      message: `agent uids ${range} overlap those of another platform on this host (pid ${clash.pid}, DATA_DIR ${clash.dataDir}, uids ${clash.base}–${clash.end - 1}): ${advice}`,
    });
  } else {
    const stranger = foreignProcessInRange(base, end, o.ownUids);
    if (stranger)
      lines.push({
        level: 'warn',
        message: `agent uids ${range}: process ${stranger.pid} runs as uid ${stranger.uid} of this range and is none of this platform's agents (another platform on this host?): ${advice}`,
      });
  }

  if (!registry.ok) return { lines, release: () => {} };
  const own = join(dir, `${process.pid}-${createHash('sha256').update(dataDir).digest('hex').slice(0, 12)}.json`);
  const claim: Claim = { pid: process.pid, startTicks: readProcStat(process.pid)?.startTicks ?? 0, base, end, dataDir };
  try {
    writeFileSync(`${own}.tmp`, JSON.stringify(claim), { mode: 0o644 });
    renameSync(`${own}.tmp`, own);
  } catch (err) {
    lines.push({ level: 'warn', message: `agent uids: ${own} could not be written (${(err as Error).message})` });
  }
  return { lines, release: () => rmSync(own, { force: true }) };
}

/**
 * The registry folder, made when missing. Its entries decide only a warning, but a folder another
 * user could write would let them fake or hide platforms: it must be this process's user's, a real
 * folder, and writable by no one else.
 */
function openRegistry(dir: string): { ok: true } | { ok: false; why: string } {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    const st = lstatSync(dir);
    if (!st.isDirectory()) return { ok: false, why: `${dir} is not a folder` };
    if (st.uid !== process.geteuid?.() || (st.mode & 0o022) !== 0)
      return { ok: false, why: `${dir} belongs to another user or others may write it` };
    return { ok: true };
  } catch (err) {
    return { ok: false, why: `${dir} cannot be used (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` };
  }
}

/** The live entries of the registry; those of processes that are gone are removed. */
function readClaims(dir: string): Claim[] {
  const out: Claim[] = [];
  let names: string[] = [];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json'));
  } catch {
    return out;
  }
  for (const name of names) {
    let claim: unknown;
    try {
      claim = JSON.parse(readFileSync(join(dir, name), 'utf8'));
    } catch {
      continue; // being written, or not ours to read: a later start sees it
    }
    if (!isClaim(claim)) continue;
    if (holderAlive(claim)) out.push(claim);
    else rmSync(join(dir, name), { force: true });
  }
  return out;
}

/** A live process (not this one) whose real uid is in [base, end) and is not one of `ownUids`. */
function foreignProcessInRange(base: number, end: number, ownUids: ReadonlySet<number>): { pid: number; uid: number } | undefined {
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const uid = processUid(Number(name));
    if (uid === undefined || uid < base || uid >= end || ownUids.has(uid)) continue;
    if (isAlive(Number(name))) return { pid: Number(name), uid };
  }
  return undefined;
}
