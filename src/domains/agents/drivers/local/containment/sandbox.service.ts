/**
 * The local driver's sandbox (docs/architecture.md rule 9: agents are tenants too; docs/agents.md "Sandbox").
 * Each agent runs under bubblewrap (`bwrap`):
 *   - as its own unprivileged OS user (a uid from the number the database allocated for it,
 *     migration 090, placed at AGENT_UID_BASE; no login, no groups), when the platform runs as root;
 *     otherwise as the platform's user inside a user namespace;
 *   - in its own mount, PID, IPC and UTS namespaces with a filesystem view made of: /usr (system
 *     binaries and libraries) and a few /etc files for name resolution and TLS, read-only; the
 *     runtime's code read-only; its own workspace and home writable; a private /tmp, /proc and /dev.
 *     Nothing else exists in it: not DATA_DIR (secrets.json, the PostgreSQL data), not other agents;
 *   - in a network namespace of its own: the built-in runtime's with loopback only and its sockets
 *     from the platform (agent-loopback.service.ts), OpenClaw's served by pasta where agent-network.service.ts can
 *     make one (root + pasta), else on the host's network (the start-up report says which).
 * As root, bwrap itself runs privileged (it builds the mounts, so the agent's user needs no right on
 * DATA_DIR or the checkout's parents) and starts `setpriv`, which drops to the agent's uid with no
 * groups, no capabilities and an empty bounding set before the runtime is executed. Without root,
 * bwrap builds the same view inside an unprivileged user namespace, as the platform's own user.
 *
 * Memory, CPU and processes of §4.7 are the kernel's: a cgroup per agent (agent-cgroup.service.ts), which
 * the launch joins before bwrap runs; the start-up report says whether the machine allows it.
 *
 * Without a working bwrap, AGENT_SANDBOX=auto refuses agents (the report's `refused`) and
 * AGENT_SANDBOX=bwrap refuses to start; only AGENT_SANDBOX=off runs agents unsandboxed.
 */
import { execFile, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, lstatSync, readlinkSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';

export type SandboxMode = 'auto' | 'bwrap' | 'off';

export type SandboxReport = {
  active: boolean;
  bwrap?: string;
  /** setpriv, used (as root) to drop to the agent's uid inside the sandbox */
  setpriv?: string;
  /** each agent runs as its own unprivileged uid (needs root) */
  separateUser: boolean;
  /** filesystem view limited to runtime (read-only), workspace and home */
  filesystem: boolean;
  /** own PID namespace: the platform's and other agents' processes are invisible */
  pidNamespace: boolean;
  /**
   * Set when agents must not start here (AGENT_SANDBOX=auto without a working sandbox): the
   * sentence they are refused with. Unsandboxed agents run only where AGENT_SANDBOX=off says so.
   */
  refused?: string;
  /** human-readable lines for the start-up log */
  lines: string[];
};

/**
 * Why an agent does not start under AGENT_SANDBOX=auto without a sandbox (shown to its owner as the
 * deployment's error, so it names no detail of the machine; the start-up line has those).
 */
const refusal = (fix: string) =>
  `Agents cannot start: this machine has no working agent sandbox. ${fix}, or set AGENT_SANDBOX=off to run agents unsandboxed, as the platform's own OS user, able to read its environment and files: only for trusted agents.`;

/**
 * The database's first agent number (migration 090 allocates them from here, one per agent, never
 * reused), and the default AGENT_UID_BASE: agent n runs as AGENT_UID_BASE + (n - FIRST_AGENT_UID)
 * (agent-uids.service.ts). Above what /etc/subuid, systemd's dynamic users and container runtimes hand out;
 * the start-up probe runs as it.
 */
export const FIRST_AGENT_UID = 1_000_000_000;

export function findOnPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(delimiter)) {
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}

/** /etc entries a runtime needs for DNS and TLS (never /etc/passwd or /etc/shadow, §8 denied paths). */
const ETC = [
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/nsswitch.conf',
  '/etc/host.conf',
  '/etc/gai.conf',
  '/etc/localtime',
  '/etc/ssl',
  '/etc/ca-certificates',
];

/**
 * The bwrap argument list around a runtime command: system view, namespaces, `ro` paths read-only,
 * `rw` paths writable, then (with `uid`) setpriv dropping to that uid, then the command.
 */
export function sandboxArgs(
  report: SandboxReport,
  o: {
    ro: string[];
    rw: string[];
    chdir: string;
    uid?: number | undefined;
    file: string;
    args: string[];
    /** the whole environment of the command: bwrap starts from an empty one (--clearenv) */
    env?: Record<string, string>;
    /** ends with the platform process (one-off commands; agents outlive a platform restart) */
    dieWithParent?: boolean;
    /** a network namespace of its own with nothing but loopback (used when no other one is set up) */
    unshareNet?: boolean;
    /**
     * the command is PID 1 of its PID namespace, with no bwrap there as its init: one process (~1.4 MB)
     * less per agent. For a command that starts nothing it must reap, and that handles SIGTERM itself
     * (PID 1 gets no default signal actions): the built-in runtime
     */
    asPid1?: boolean;
  },
): string[] {
  const out = baseArgs();
  if (o.asPid1) out.push('--as-pid-1');
  if (o.unshareNet) out.push('--unshare-net');
  if (o.dieWithParent) out.push('--die-with-parent');
  if (o.env) {
    out.push('--clearenv');
    for (const [k, v] of Object.entries(o.env)) out.push('--setenv', k, v);
  }
  // directories bwrap creates on its own are 0700 when it runs as root: create every parent of a
  // bound path first, traversable (0755), so the agent's user can reach what is bound for it
  const parents = new Set<string>();
  for (const p of [...ETC, ...o.ro, ...o.rw]) for (let d = dirname(p); d !== '/' && !parents.has(d); d = dirname(d)) parents.add(d);
  for (const d of [...parents].filter((x) => x !== '/tmp' && x !== '/usr' && !x.startsWith('/usr/')).sort((a, b) => a.length - b.length))
    out.push('--perms', '0755', '--dir', d);
  for (const p of ETC) out.push('--ro-bind-try', p, p);
  for (const p of o.ro) out.push('--ro-bind', p, p);
  for (const p of o.rw) out.push('--bind', p, p);
  out.push('--chdir', o.chdir);
  const { options, command } = splitArgs(report, out, o);
  return [...options, ...command];
}

/**
 * The same as sandboxArgs, as bwrap's options (which may hold secrets: `--setenv`) and the command
 * line after them; the options go through a pipe (`bwrap --args FD`), so no other user reads them
 * in /proc/<pid>/cmdline, and bwrap wants the command itself on its real command line.
 */
export function sandboxArgv(report: SandboxReport, o: Parameters<typeof sandboxArgs>[1]): { options: string[]; command: string[] } {
  const all = sandboxArgs(report, o);
  const at = all.indexOf('--');
  return { options: all.slice(0, at), command: all.slice(at) };
}

function splitArgs(report: SandboxReport, options: string[], o: { uid?: number | undefined; file: string; args: string[] }) {
  if (o.uid !== undefined && report.setpriv) {
    // only these three survive into the sandbox, and setpriv gives them up before the runtime runs
    options.push('--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID', '--cap-add', 'CAP_SETPCAP');
    return {
      options,
      command: [
        '--',
        report.setpriv,
        `--reuid=${o.uid}`,
        `--regid=${o.uid}`,
        '--clear-groups',
        '--inh-caps=-all',
        '--bounding-set=-all',
        '--',
        o.file,
        ...o.args,
      ],
    };
  }
  return { options, command: ['--', o.file, ...o.args] };
}

/**
 * A one-off command as an agent (the file explorer's git, docs/security.md N1): the same profile with only
 * `dir` bound (read-write), the agent's uid, HOME=/tmp (private and empty), ended with the
 * platform or at the timeout. With `netns` it runs in the agent's own network namespace (entered
 * with nsenter before bwrap starts), otherwise in one with nothing but loopback.
 */
export function runInSandbox(
  report: SandboxReport,
  where: { dir: string; uid?: number | undefined; netns?: { nsenter: string; file: string } | undefined },
  file: string,
  args: string[],
  o: { env: Record<string, string>; timeoutMs: number; maxBuffer: number },
): Promise<string> {
  if (!report.active || !report.bwrap) return Promise.reject(new Error('no sandbox on this machine'));
  const bwrapArgs = sandboxArgs(report, {
    ro: [],
    rw: [where.dir],
    chdir: where.dir,
    uid: where.uid,
    file,
    args,
    env: { ...o.env, HOME: '/tmp' },
    dieWithParent: true,
    unshareNet: !where.netns,
  });
  const cmd = where.netns
    ? { file: where.netns.nsenter, args: [`--net=${where.netns.file}`, '--', report.bwrap, ...bwrapArgs] }
    : { file: report.bwrap, args: bwrapArgs };
  return new Promise((resolve, reject) => {
    execFile(
      cmd.file,
      cmd.args,
      { timeout: o.timeoutMs, maxBuffer: o.maxBuffer, env: { PATH: '/usr/bin:/bin' }, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => (err ? reject(Object.assign(err, { stderr })) : resolve(stdout)),
    );
  });
}

/** The fixed part of the bwrap command line (system view, namespaces); binds of the agent's own paths follow. */
export function baseArgs(): string[] {
  const args = ['--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--ro-bind', '/usr', '/usr'];
  for (const link of ['lib', 'lib64', 'bin', 'sbin']) {
    const p = `/${link}`;
    if (!existsSync(p)) continue;
    let target: string | undefined;
    try {
      target = readlinkIfLink(p);
    } catch {
      target = undefined;
    }
    if (target) args.push('--symlink', target, p);
    else args.push('--ro-bind', p, p);
  }
  args.push('--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--tmpfs', '/tmp');
  return args;
}

const readlinkIfLink = (p: string): string | undefined => (lstatSync(p).isSymbolicLink() ? readlinkSync(p) : undefined);

let cached: { mode: SandboxMode; report: SandboxReport } | undefined;

/** What sandbox this host gives agents; probed once per process (a bwrap run of `true`). */
export function detectSandbox(mode: SandboxMode): SandboxReport {
  if (cached?.mode === mode) return cached.report;
  const report = probe(mode);
  cached = { mode, report };
  return report;
}

function probe(mode: SandboxMode): SandboxReport {
  const none = { active: false, separateUser: false, filesystem: false, pidNamespace: false } as const;
  // fail closed (docs/agents.md "Sandbox"): without a sandbox, `auto` refuses agents; only an
  // explicit `off` runs them unsandboxed, and says once what that means
  if (mode === 'off')
    return {
      ...none,
      lines: [
        "AGENT_SANDBOX=off: agents run unsandboxed as this process's user and can read its environment (its keys and database URL) and DATA_DIR, other agents' folders included: only for trusted agents",
      ],
    };
  const refuse = (why: string, fix: string): SandboxReport => ({
    ...none,
    refused: refusal(fix.charAt(0).toUpperCase() + fix.slice(1)),
    lines: [`agent sandbox unavailable (${why}): agents are refused; ${fix} or set AGENT_SANDBOX=off to run agents unsandboxed`],
  });
  const bwrap = findOnPath('bwrap');
  if (!bwrap) {
    if (mode === 'bwrap') throw new Error('AGENT_SANDBOX=bwrap but bubblewrap (bwrap) is not installed: apt-get install bubblewrap');
    return refuse('bubblewrap (bwrap) not found', 'install bubblewrap (apt install bubblewrap)');
  }
  const root = process.getuid?.() === 0;
  const setpriv = root ? findOnPath('setpriv') : undefined;
  const trial: SandboxReport = {
    active: true,
    bwrap,
    ...(setpriv ? { setpriv } : {}),
    separateUser: Boolean(setpriv),
    filesystem: true,
    pidNamespace: true,
    lines: [],
  };
  const r = spawnSync(
    bwrap,
    sandboxArgs(trial, { ro: [], rw: [], chdir: '/', uid: setpriv ? FIRST_AGENT_UID : undefined, file: '/usr/bin/env', args: ['true'] }),
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 10_000,
      env: {},
    },
  );
  if (r.status !== 0) {
    const why = `bwrap cannot create a sandbox here (${(r.stderr?.toString() || r.error?.message || `exit ${r.status}`).trim()})`;
    if (mode === 'bwrap') throw new Error(`AGENT_SANDBOX=bwrap but ${why}`);
    return refuse(why, 'let bubblewrap create namespaces here (docs/agents.md "Sandbox")');
  }
  const lines = [
    `agent sandbox ON (bubblewrap ${bwrap}): own mount/PID/IPC/UTS namespaces; filesystem view = runtime read-only + own workspace and home`,
    setpriv
      ? 'agent sandbox: each agent runs as its own unprivileged uid (from AGENT_UID_BASE), without groups or capabilities'
      : root
        ? 'agent sandbox: setpriv (util-linux) not found, so agents run as root inside the sandbox: install util-linux for a uid per agent'
        : "agent sandbox: not root, so agents share the platform's uid (inside a user namespace); run as root for a uid per agent",
    // memory, CPU and processes per plan: agent-cgroup.service.ts says what it could set up
  ];
  return { ...trial, lines };
}
