/**
 * Per-key hold counts (src/lib/hold-counts.ts), behind the agent proxy's sockets per user and the
 * idle sweep's busy agents: a release counts once however often it is called, and a key with no
 * hold left is gone.
 */
import { describe, expect, it } from 'vitest';
import { createHoldCounts } from '../../src/lib/hold-counts.ts';

describe('createHoldCounts', () => {
  it('counts the holds of each key, each released once', () => {
    const holds = createHoldCounts();
    let released = 0;
    const first = holds.hold('a', () => released++);
    const second = holds.hold('a');
    holds.hold('b');
    expect([holds.count('a'), holds.count('b'), holds.count('c')]).toEqual([2, 1, 0]);
    first();
    first();
    expect(holds.count('a')).toBe(1);
    expect(released).toBe(1);
    second();
    expect(holds.count('a')).toBe(0);
    expect([...holds.held()]).toEqual(['b']);
  });
});
