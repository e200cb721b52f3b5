/**
 * The shared AI_TIMEOUT_MS timer (src/lib/deadline-list.ts): an entry fires after its duration and
 * within two ticks of it, never early; a removed entry never fires; entries in any order of removal
 * keep the list consistent; the timer stops when the list is empty. The AI layer's use of it is
 * covered by test/ai/streaming.test.ts ("AI_TIMEOUT_MS bounds each attempt, then the fallback is tried").
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createDeadlineList } from '../../src/lib/deadline-list.ts';

describe('createDeadlineList', () => {
  it('fires an entry after its duration, never early and within two ticks', async () => {
    const fired: [string, number][] = [];
    const started = Date.now();
    const list = createDeadlineList<string>(200, (v) => fired.push([v, Date.now() - started]));
    list.add('a');
    await sleep(150);
    expect(fired).toEqual([]);
    await sleep(200);
    expect(fired.map((f) => f[0])).toEqual(['a']);
    expect(fired[0]![1]).toBeGreaterThanOrEqual(200);
    expect(fired[0]![1]).toBeLessThan(200 + 2 * 10 + 100); // 2 ticks of 10 ms, and room for a busy machine
    expect(list.size).toBe(0);
  });

  it('never fires a removed entry; removing from the head, middle and tail keeps the others', async () => {
    const fired: number[] = [];
    const list = createDeadlineList<number>(60, (v) => fired.push(v));
    const entries = [0, 1, 2, 3, 4, 5].map((v) => list.add(v));
    list.remove(entries[0]!); // head
    list.remove(entries[3]!); // middle
    list.remove(entries[5]!); // tail
    list.remove(entries[3]!); // twice: nothing happens
    expect(list.size).toBe(3);
    await sleep(150);
    expect(fired).toEqual([1, 2, 4]);
    list.remove(entries[1]!); // after it fired: nothing happens
    expect(list.size).toBe(0);
  });

  it('keeps firing entries added later, in order, after the list was empty', async () => {
    const fired: string[] = [];
    const list = createDeadlineList<string>(40, (v) => fired.push(v));
    list.add('first');
    await sleep(120);
    list.add('second');
    list.add('third');
    await sleep(120);
    expect(fired).toEqual(['first', 'second', 'third']);
  });

  it('does not keep the process alive while an entry waits', async () => {
    const { spawnSync } = await import('node:child_process');
    const script = `import { createDeadlineList } from ${JSON.stringify(new URL('../../src/lib/deadline-list.ts', import.meta.url).href)};
      const list = createDeadlineList(60_000, () => { console.log('fired'); });
      list.add(1);`;
    const started = Date.now();
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('');
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
