/**
 * Each local agent's own network namespace (docs/security.md "Network", finding N8).
 *
 * Shared with the host, an agent reached every loopback service (PostgreSQL, Redis, the platform's
 * own ports, where loopback counts as a trusted proxy) and every other agent's gateway. Now, per
 * agent:
 *   1. `unshare --net=<base>/netns true` makes an empty network namespace, kept alive by a bind mount
 *      on a file in the agent's platform-owned folder (outside the workspace);
 *   2. Debian's `pasta` (package passt) is attached to it: `-t 127.0.0.1/<port>` forwards the agent's
 *      gateway port from the host's loopback into the namespace (the platform reaches the agent as
 *      before), `-T <ports>` forwards only the platform's own backend port(s) the agent calls (its AI
 *      gateway and callbacks) from the namespace's loopback to the host's; nothing else on the host's
 *      loopback exists for the agent. `--no-map-gw` keeps the gateway address from being a back door
 *      to the host's loopback. With AGENT_NETWORK=internet (default) pasta also gives the namespace a
 *      copy of the host's address and routes (`--config-net`): the agent reaches the internet, as an
 *      unprivileged process of the host would, through pasta's sockets; with AGENT_NETWORK=platform it
 *      has loopback only (the forwarded ports) and no route anywhere else;
 *   3. bubblewrap is started inside it (`nsenter --net=<file> bwrap …`).
 * pasta runs as root only to join the namespace; it keeps CAP_NET_BIND_SERVICE and CAP_SYS_ADMIN
 * in effect and nothing else, confines itself with seccomp, and never parses the agent's traffic
 * beyond layer 4. It is detached like the agent (both outlive a platform restart) and its pid is in
 * the agent's state file, so stop and delete end it and unmount the namespace.
 *
 * Needs root (setns into a namespace of the initial user namespace) and pasta, nsenter, unshare and
 * umount on PATH. Without them agents keep the host's network and the start-up report says so.
 *
 * The built-in runtime needs none of this: it only ever calls the platform, so in the sandbox it gets
 * a namespace with loopback alone and its two sockets from the platform (agent-loopback.service.ts), without
 * pasta (~30 MB per agent) and without root. It falls back to pasta only when one of its platform
 * URLs is not on this machine.
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { isAlive, readComm } from './proc.service.ts';
import { findOnPath } from './sandbox.service.ts';

const execFileAsync = promisify(execFile);

/** AGENT_NETWORK: internet (own namespace, internet and the platform's ports), platform (the platform's ports only), host (no namespace). */
export type AgentNetworkMode = 'internet' | 'platform' | 'host';

export type NetworkReport = {
  /** agents get a network namespace of their own (pasta's, or the built-in runtime's loopback-only one) */
  isolated: boolean;
  mode: AgentNetworkMode;
  /** built-in runtime: loopback-only namespace, gateway socket and platform ports from the platform (agent-loopback.service.ts) */
  bridge?: boolean;
  pasta?: string;
  nsenter?: string;
  unshare?: string;
  umount?: string;
  lines: string[];
};

/**
 * What the running agent's network needs remembered (the state file): the namespace's file (its
 * pasta is found by that file when the network is closed, closeAgentNetworks).
 */
export type AgentNetwork = { nsFile: string };

export function detectNetwork(mode: AgentNetworkMode, sandboxActive: boolean, runtime: 'builtin' | 'openclaw' = 'builtin'): NetworkReport {
  const report = detectPasta(mode, sandboxActive);
  if (runtime !== 'builtin' || mode === 'host' || !sandboxActive) return report;
  // bwrap's own --unshare-net makes the namespace (as root or in a user namespace); pasta, when
  // present, stays for an agent whose platform URLs are elsewhere
  return {
    ...report,
    isolated: true,
    bridge: true,
    lines: [
      "agent network: each built-in agent has a network namespace with loopback only; the platform hands it its gateway socket and forwards the platform's backend port(s) to it (no internet, not this machine's loopback services, not other agents)",
      ...(report.isolated
        ? []
        : [`agent network: an agent whose platform URLs are not on this machine shares the host's network (${report.lines.join('; ')})`]),
    ],
  };
}

function detectPasta(mode: AgentNetworkMode, sandboxActive: boolean): NetworkReport {
  const shared = (why: string): NetworkReport => ({
    isolated: false,
    mode,
    lines: [
      `agent network SHARED with the host: ${why}; an agent can reach every service on this machine's loopback (databases, caches, the platform's ports)`,
    ],
  });
  if (mode === 'host') return shared('AGENT_NETWORK=host');
  if (!sandboxActive) return shared('no sandbox');
  if (process.getuid?.() !== 0) return shared('the platform does not run as root (a network namespace of its own needs it)');
  const tools = {
    pasta: findOnPath('pasta'),
    nsenter: findOnPath('nsenter'),
    unshare: findOnPath('unshare'),
    umount: findOnPath('umount'),
  };
  const missing = Object.entries(tools)
    .filter(([, v]) => !v)
    .map(([k]) => (k === 'pasta' ? 'pasta (apt-get install passt)' : `${k} (util-linux)`));
  if (missing.length > 0) return shared(`${missing.join(', ')} not found`);
  // can this host make one? (some container runtimes refuse the bind mount or the unshare)
  const dir = mkdtempSync(join(tmpdir(), 'agent-netns-probe-'));
  const file = join(dir, 'netns');
  try {
    writeFileSync(file, '');
    const r = spawnSync(tools.unshare!, [`--net=${file}`, 'true'], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 });
    if (r.status !== 0) return shared(`no network namespace here (${(r.stderr?.toString() || `exit ${r.status}`).trim()})`);
    spawnSync(tools.umount!, [file], { stdio: 'ignore', timeout: 10_000 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    isolated: true,
    mode,
    pasta: tools.pasta!,
    nsenter: tools.nsenter!,
    unshare: tools.unshare!,
    umount: tools.umount!,
    lines: [
      mode === 'internet'
        ? "agent network: each agent has its own network namespace (pasta): the internet and the platform's backend port, not this machine's loopback services or other agents"
        : "agent network: each agent has its own network namespace (pasta) with the platform's backend port only (AGENT_NETWORK=platform: no internet)",
    ],
  };
}

const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** The protocol and port of `raw` when it is a URL on this machine's loopback, else undefined. */
export function loopbackTarget(raw: string): { protocol: string; port: number } | undefined {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return undefined; // not a URL
  }
  if (!LOOPBACK_HOSTS.has(u.hostname)) return undefined;
  return { protocol: u.protocol, port: Number(u.port || (u.protocol === 'https:' ? 443 : 80)) };
}

/** Loopback ports of the platform an agent calls (its AI gateway, its callbacks), from the URLs in its environment. */
export function platformPorts(urls: (string | undefined)[]): number[] {
  const ports = new Set<number>();
  for (const raw of urls) {
    const target = raw ? loopbackTarget(raw) : undefined;
    if (target) ports.add(target.port);
  }
  return [...ports].sort((a, b) => a - b);
}

const isPasta = (pid: number) => /^(pasta|passt)/.test(readComm(pid) ?? ''); // pasta re-executes itself as passt.avx2 where it can

/** The pasta processes serving the namespace file `nsFile` (their command line is the platform's, not the agent's). */
function pastasOf(nsFile: string): number[] {
  const needle = `\0--netns\0${nsFile}\0`;
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || !isPasta(Number(name))) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(needle)) out.push(Number(name));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Ends one network of an agent: its pasta, the namespace's mount and file; safe when there is none. */
async function closeOne(report: NetworkReport, nsFile: string): Promise<void> {
  const pids = pastasOf(nsFile);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      /* gone */
    }
  }
  const deadline = Date.now() + 2_000;
  while (pids.some(isAlive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  if (!existsSync(nsFile)) return;
  if (report.umount) await run(report.umount, ['-l', nsFile]).catch(() => {}); // lazily: a late pasta exit cannot keep it busy
  rmSync(nsFile, { force: true });
}

/**
 * Ends every network of the agent whose platform folder is `base` (netns-* files: normally one;
 * two platform processes on one DATA_DIR that started the agent at once leave two).
 */
export async function closeAgentNetworks(report: NetworkReport, base: string): Promise<void> {
  let names: string[] = [];
  try {
    names = readdirSync(base).filter((n) => /^netns-[0-9a-f]+$/.test(n));
  } catch {
    return;
  }
  await Promise.all(names.map((n) => closeOne(report, join(base, n))));
}

/**
 * Makes the agent's namespace and attaches pasta; resolves once the gateway port is bound on the
 * host (the caller then probes the agent through it).
 */
export async function openAgentNetwork(
  report: NetworkReport,
  o: { base: string; agentPort: number; forward: number[]; logFd: number },
): Promise<AgentNetwork> {
  const nsFile = join(o.base, `netns-${randomBytes(6).toString('hex')}`);
  writeFileSync(nsFile, '', { mode: 0o600, flag: 'wx' });
  try {
    return await attach(report, { ...o, nsFile });
  } catch (err) {
    await closeOne(report, nsFile);
    throw err;
  }
}

async function attach(
  report: NetworkReport,
  o: { nsFile: string; agentPort: number; forward: number[]; logFd: number },
): Promise<AgentNetwork> {
  await run(report.unshare!, [`--net=${o.nsFile}`, 'true']);
  const args = [
    ...(report.mode === 'internet' ? ['--config-net'] : []),
    '-t',
    `127.0.0.1/${o.agentPort}`,
    '-T',
    o.forward.length > 0 ? o.forward.join(',') : 'none',
    '-u',
    'none',
    '-U',
    'none',
    '--no-map-gw',
    '-q',
    '-f',
    // as root pasta would switch to `nobody` first and then may not join the namespace
    '--runas',
    '0:0',
    '--netns',
    o.nsFile,
    '--netns-only',
  ];
  const child = spawn(report.pasta!, args, { detached: true, stdio: ['ignore', o.logFd, o.logFd], env: { PATH: '/usr/bin:/bin' } });
  child.on('error', () => {});
  child.unref();
  const pid = child.pid;
  if (!pid) throw new Error('could not start pasta for the agent network');
  // pasta binds the forwarded host port once the namespace is set up (milliseconds)
  const deadline = Date.now() + 5_000;
  while (Date.now() < deadline && isAlive(pid)) {
    if (await portAccepts(o.agentPort)) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  if (!isAlive(pid)) throw new Error('pasta exited while setting up the agent network (see its process log)');
  return { nsFile: o.nsFile };
}

/** The command that starts `file args` inside the agent's namespace. */
export const inNetwork = (report: NetworkReport, nsFile: string, file: string, args: string[]) => ({
  file: report.nsenter!,
  args: [`--net=${nsFile}`, '--', file, ...args],
});

/** Whether something accepts connections at `to` now (a TCP port: pasta's forward, an agent's gateway; a Unix socket). */
export function accepts(to: { host: string; port: number } | { path: string }): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(to);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Whether something accepts TCP connections on 127.0.0.1:`port` now (pasta's forward, an agent's gateway). */
export const portAccepts = (port: number) => accepts({ host: '127.0.0.1', port });

async function run(file: string, args: string[]): Promise<void> {
  await execFileAsync(file, args, { env: { PATH: '/usr/bin:/bin' } });
}
