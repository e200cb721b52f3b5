/**
 * §4.7 memory and CPU per plan (src/domains/agents/drivers/local/containment/agent-cgroup.service.ts, docs/agents.md
 * "Sandbox"): the files each hierarchy gets, and — where this machine lets root create cgroups —
 * the kernel enforcing them: a process started through enter() is in the agent's group from its
 * first instruction, and one that allocates past the plan's memory is killed there.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AGENT_PIDS_MAX, detectCgroups, enter } from '../../src/domains/agents/drivers/local/containment/agent-cgroup.service.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function fakeV2(): string {
  const root = mkdtempSync(join(tmpdir(), 'cgroup2-'));
  dirs.push(root);
  writeFileSync(join(root, 'cgroup.controllers'), 'cpuset cpu io memory hugetlb pids rdma misc\n');
  return root;
}

describe('cgroup v2 (a folder shaped like the unified mount)', () => {
  it('enables the controllers for its subtree and writes memory.max, cpu.max and pids.max per plan', () => {
    const root = fakeV2();
    const { cgroups, lines } = detectCgroups(root, '0::/\n');
    expect(lines.join()).toMatch(/cgroup v2/);
    expect(cgroups?.version).toBe(2);
    const procs = cgroups!.prepare('agent-1', { memoryMb: 512, cpus: 0.5 });
    const g = join(root, 'agent-platform', 'agent-1');
    expect(procs).toEqual([join(g, 'cgroup.procs')]);
    expect(readFileSync(join(root, 'cgroup.subtree_control'), 'utf8')).toBe('+memory +cpu +pids');
    expect(readFileSync(join(root, 'agent-platform', 'cgroup.subtree_control'), 'utf8')).toBe('+memory +cpu +pids');
    expect(readFileSync(join(g, 'memory.max'), 'utf8')).toBe(String(512 * 1024 * 1024));
    expect(readFileSync(join(g, 'cpu.max'), 'utf8')).toBe('50000 100000');
    expect(readFileSync(join(g, 'pids.max'), 'utf8')).toBe(String(AGENT_PIDS_MAX));
  });

  it('refuses, saying why, when the platform is not in the root group or a controller is missing', () => {
    expect(detectCgroups(fakeV2(), '0::/system.slice/platform.service\n').cgroups).toBeUndefined();
    expect(detectCgroups(fakeV2(), '0::/system.slice/platform.service\n').lines.join()).toMatch(/Delegate=yes/);
    const root = fakeV2();
    writeFileSync(join(root, 'cgroup.controllers'), 'cpu pids\n');
    expect(detectCgroups(root, '0::/\n').lines.join()).toMatch(/without memory/);
  });
});

describe('cgroup v1 (one folder per controller)', () => {
  it('writes the memory (and memory+swap) limit, the CFS quota and pids.max', () => {
    const root = mkdtempSync(join(tmpdir(), 'cgroup1-'));
    dirs.push(root);
    for (const c of ['memory', 'cpu', 'pids']) {
      mkdirSync(join(root, c));
      writeFileSync(join(root, c, 'cgroup.procs'), '');
    }
    // a real hierarchy creates these in every new group; the fake needs the memsw one to exist
    mkdirSync(join(root, 'memory', 'agent-platform', 'agent-2'), { recursive: true });
    writeFileSync(join(root, 'memory', 'agent-platform', 'agent-2', 'memory.memsw.limit_in_bytes'), '');
    const { cgroups } = detectCgroups(root, '');
    expect(cgroups?.version).toBe(1);
    const procs = cgroups!.prepare('agent-2', { memoryMb: 1024, cpus: 2 });
    expect(procs).toHaveLength(3);
    const read = (c: string, f: string) => readFileSync(join(root, c, 'agent-platform', 'agent-2', f), 'utf8');
    expect(read('memory', 'memory.limit_in_bytes')).toBe(String(1024 * 1024 * 1024));
    expect(read('memory', 'memory.memsw.limit_in_bytes')).toBe(String(1024 * 1024 * 1024));
    expect(read('cpu', 'cpu.cfs_quota_us')).toBe('200000');
    expect(read('cpu', 'cpu.cfs_period_us')).toBe('100000');
    expect(read('pids', 'pids.max')).toBe(String(AGENT_PIDS_MAX));
  });
});

// the machine's own cgroups, as root: the kernel enforces what the files say
const real = process.getuid?.() === 0 ? detectCgroups() : { cgroups: undefined, lines: ['not root'] };
if (!real.cgroups) console.warn(`agent-cgroup.test.ts: kernel enforcement not tested: ${real.lines.join('; ')}`);

function run(cmd: { file: string; args: string[] }): Promise<{ code: number | null; signal: string | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = execFile(cmd.file, cmd.args, { timeout: 30_000 }, (err, stdout) => {
      resolve({ code: child.exitCode, signal: child.signalCode ?? (err as { signal?: string } | null)?.signal ?? null, stdout });
    });
  });
}

describe.skipIf(!real.cgroups)("the machine's cgroups", () => {
  const id = `test-${process.pid}-${Date.now().toString(36)}`;
  afterAll(() => real.cgroups?.remove(id));

  it('a process started through enter() is in the agent group, and one past the memory limit is killed there', async () => {
    const procs = real.cgroups!.prepare(id, { memoryMb: 64, cpus: 0.5 });
    const where = await run(
      enter(procs, process.execPath, ['-e', "process.stdout.write(require('fs').readFileSync('/proc/self/cgroup','utf8'))"]),
    );
    expect(where.code).toBe(0);
    expect(where.stdout).toContain(`agent-platform/${id}`);
    // 256 MB touched page by page in a 64 MB group: the kernel's OOM killer ends it (SIGKILL)
    const hog = await run(
      enter(procs, process.execPath, [
        '-e',
        'const a = []; for (let i = 0; i < 256; i++) a.push(Buffer.alloc(1 << 20, 1)); console.log("survived")',
      ]),
    );
    expect(hog.stdout).not.toContain('survived');
    expect(hog.signal).toBe('SIGKILL');
  });

  it("lists the group's processes (what stopping an agent ends: never another platform's agent with the same uid)", async () => {
    const procs = real.cgroups!.prepare(id, { memoryMb: 64, cpus: 0.5 });
    const cmd = enter(procs, process.execPath, ['-e', 'setTimeout(() => {}, 30_000)']);
    const child = spawn(cmd.file, cmd.args, { stdio: 'ignore' });
    const deadline = Date.now() + 5_000;
    while (!real.cgroups!.processes(id).includes(child.pid!) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(real.cgroups!.processes(id)).toEqual([child.pid]);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(real.cgroups!.processes(id)).toEqual([]);
  });
});
