/**
 * How `npm start` replaces its builds (scripts/lib/switch-build.ts): concurrent starts build once,
 * a reader of the link never finds it missing or half-written while builds switch, a build a
 * running process marked in use is kept, old unused ones go, and a folder of the earlier layout
 * (dist/ as a real folder) is replaced by the link.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { installBuild, markedInUse } from '../../scripts/lib/switch-build.ts';
import { IN_USE_DIR } from '../../src/lib/code-tree.ts';

const root = mkdtempSync(join(tmpdir(), 'switch-build-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A build that writes its name into two files, slowly, as a compiler would. */
const slowBuild = (content: string, counter: { n: number }) => async (dir: string) => {
  counter.n++;
  writeFileSync(join(dir, 'a.txt'), content);
  await new Promise((r) => setTimeout(r, 30));
  writeFileSync(join(dir, 'b.txt'), content);
  return undefined;
};

describe('installBuild', () => {
  it('five starts at once build one folder and all use it', async () => {
    const link = join(root, 'once', 'dist');
    mkdirSync(join(root, 'once'));
    const counter = { n: 0 };
    const results = await Promise.all(
      Array.from({ length: 5 }, () =>
        installBuild({ link, prefix: '.b-', name: 'h1', upToDate: (d) => d.endsWith('.b-h1'), build: slowBuild('one', counter) }),
      ),
    );
    expect(counter.n).toBe(1);
    expect(new Set(results.map((r) => r.dir)).size).toBe(1);
    expect(results.filter((r) => r.built)).toHaveLength(1);
    expect(readFileSync(join(link, 'b.txt'), 'utf8')).toBe('one');
  });

  it('while builds switch, a reader of the link always finds a whole build', async () => {
    const link = join(root, 'switch', 'dist');
    mkdirSync(join(root, 'switch'));
    const counter = { n: 0 };
    await installBuild({ link, prefix: '.b-', name: 'v0', upToDate: () => false, build: slowBuild('v0', counter) });
    let reading = true;
    const failures: string[] = [];
    let reads = 0;
    const reader = (async () => {
      while (reading) {
        try {
          const a = readFileSync(join(link, 'a.txt'), 'utf8');
          const b = readFileSync(join(link, 'b.txt'), 'utf8');
          reads++;
          // a and b of one read may come from two builds if the link switched between them; each file is whole
          if (!/^v\d+$/.test(a) || !/^v\d+$/.test(b)) failures.push(`${a}/${b}`);
        } catch (err) {
          failures.push((err as Error).message);
        }
        await new Promise((r) => setImmediate(r));
      }
    })();
    for (let i = 1; i <= 8; i++)
      await installBuild({ link, prefix: '.b-', name: `v${i}`, upToDate: () => false, build: slowBuild(`v${i}`, counter) });
    reading = false;
    await reader;
    expect(failures).toEqual([]);
    expect(reads).toBeGreaterThan(8);
    expect(readlinkSync(link)).toBe('.b-v8');
  });

  it('keeps an old build a live process marked in use, removes unused old ones, replaces a dist/ folder of the earlier layout', async () => {
    const dir = join(root, 'gc');
    mkdirSync(join(dir, 'dist'), { recursive: true });
    writeFileSync(join(dir, 'dist', 'main.js'), 'earlier layout');
    const counter = { n: 0 };
    const build = (v: string) =>
      installBuild({
        link: join(dir, 'dist'),
        prefix: '.b-',
        name: v,
        upToDate: (d) => d.endsWith(`.b-${v}`),
        build: async (d) => {
          await slowBuild(v, counter)(d);
          mkdirSync(join(d, IN_USE_DIR));
          return undefined;
        },
        inUse: markedInUse,
        keepMs: 0,
      });
    await build('old');
    expect(readFileSync(join(dir, 'dist', 'a.txt'), 'utf8')).toBe('old'); // the real folder was moved aside
    // a running process (here: a sleeping child) marks the old build in use
    const child = spawn('sleep', ['30']);
    writeFileSync(join(dir, '.b-old', IN_USE_DIR, String(child.pid)), '');
    await build('unused');
    await build('new');
    expect(existsSync(join(dir, '.b-old'))).toBe(true); // in use
    expect(existsSync(join(dir, '.b-unused'))).toBe(false); // neither linked nor in use
    expect(existsSync(join(dir, '.b-new'))).toBe(true);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    await build('new');
    expect(existsSync(join(dir, '.b-old'))).toBe(false); // its process is gone
    expect(readFileSync(join(dir, 'dist', 'a.txt'), 'utf8')).toBe('new');
  });
});
