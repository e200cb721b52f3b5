import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { classify, createOsMetrics } from './health.service.ts';

describe('§4.12 health', () => {
  it('classifies by the worse of CPU and memory at 70% and 85%', () => {
    expect(classify(70, 70)).toBe('healthy');
    expect(classify(70.1, 10)).toBe('degraded');
    expect(classify(10, 85)).toBe('degraded');
    expect(classify(10, 85.1)).toBe('unhealthy');
  });

  it('measures CPU since the previous sample, starting at creation (not since boot)', async () => {
    const m = createOsMetrics();
    // keep one core busy for 200 ms: measured since creation, that core alone is 1/cores of all
    // CPU time (a since-boot average would hide it on a machine that was idle for hours)
    const until = Date.now() + 200;
    while (Date.now() < until);
    const cpu = m.cpuPercent();
    expect(cpu).toBeGreaterThanOrEqual((100 / os.cpus().length) * 0.7);
    expect(cpu).toBeLessThanOrEqual(100);
    expect(m.memoryPercent()).toBeGreaterThan(0);
  });
});
