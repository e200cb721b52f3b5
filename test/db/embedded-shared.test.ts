/**
 * The embedded PostgreSQL server of one DATA_DIR is shared by the platform processes on it
 * (src/db/embedded.ts): it runs in its own session (a terminal's Ctrl-C to the platform's process
 * group does not reach it), a second start joins it instead of failing on its postmaster.pid, the
 * last process to leave stops it, and a server whose platform was killed is joined by the next start.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../../src/db/embedded.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'platform-shared-pg-'));
chmodSync(dataDir, 0o755); // the server runs as the postgres OS user when we are root
const options = { dataDir, password: 'shared-pw', database: 'postgres' };

const serverPid = () => {
  try {
    return Number(readFileSync(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
};
const alive = (pid: number | undefined) => {
  try {
    return pid !== undefined && !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};
const processGroup = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[2]);
async function query(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one;
  } finally {
    await c.end();
  }
}

afterAll(() => {
  const pid = serverPid();
  if (alive(pid)) process.kill(pid!, 'SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

describe('the embedded server of one DATA_DIR', () => {
  it('runs outside our process group; a second start joins it; the last to leave stops it', async () => {
    const a = await startEmbeddedPostgres(options);
    const pid = serverPid()!;
    expect(processGroup(pid)).not.toBe(processGroup(process.pid));
    const b = await startEmbeddedPostgres(options);
    expect(b.url).toBe(a.url);
    expect(serverPid()).toBe(pid);

    await a.stop();
    expect(alive(pid)).toBe(true); // b still uses it
    expect(await query(b.url)).toBe(1);
    await b.stop();
    expect(alive(pid)).toBe(false);
  }, 60_000);

  it('a server left by a killed process is joined by the next start, which stops it when it leaves', async () => {
    const script = `
      const { startEmbeddedPostgres } = await import(${JSON.stringify(join(import.meta.dirname, '../../src/db/embedded.ts'))});
      await startEmbeddedPostgres(${JSON.stringify(options)});
      console.log('up');
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (d: Buffer) => d.toString().includes('up') && resolve());
      child.once('exit', (code) => reject(new Error(`exited ${code}`)));
    });
    const pid = serverPid()!;
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(alive(pid)).toBe(true);

    const next = await startEmbeddedPostgres(options);
    expect(serverPid()).toBe(pid);
    expect(await query(next.url)).toBe(1);
    await next.stop();
    expect(alive(pid)).toBe(false);
  }, 60_000);
});
