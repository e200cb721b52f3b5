/**
 * The per-key queue (src/lib/keyed-queue.ts) behind the local driver's lifecycle calls and the
 * lifecycle locks: one key's calls run one at a time in arrival order, a failure does not stop the
 * next, other keys are not held up.
 */
import { describe, expect, it } from 'vitest';
import { createKeyedQueue } from '../../src/lib/keyed-queue.ts';

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

describe('createKeyedQueue', () => {
  it("runs one key's calls one after another, in order, even after a failure", async () => {
    const queued = createKeyedQueue();
    const order: string[] = [];
    const gate = deferred();
    const first = queued('a', async () => {
      order.push('first starts');
      await gate.promise;
      order.push('first ends');
      throw new Error('first failed');
    });
    const second = queued('a', async () => {
      order.push('second');
      return 2;
    });
    await Promise.resolve();
    expect(order).toEqual(['first starts']);
    gate.resolve();
    await expect(first).rejects.toThrow('first failed');
    await expect(second).resolves.toBe(2);
    expect(order).toEqual(['first starts', 'first ends', 'second']);
  });

  it('does not hold a key back behind another key', async () => {
    const queued = createKeyedQueue();
    const gate = deferred();
    const slow = queued('a', () => gate.promise);
    await expect(queued('b', async () => 'b')).resolves.toBe('b');
    gate.resolve();
    await slow;
  });
});
