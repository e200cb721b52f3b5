import { describe, expect, it } from 'vitest';
import { classify, createHealthService, createPlatformMetrics } from './health.service.ts';

describe('§4.12 health', () => {
  it('classifies by the worse of CPU and memory at 70% and 85%', () => {
    expect(classify(70, 70)).toBe('healthy');
    expect(classify(70.1, 10)).toBe('degraded');
    expect(classify(10, 85)).toBe('degraded');
    expect(classify(10, 85.1)).toBe('unhealthy');
  });

  it("measures the platform's own event loop since the previous sample, starting at creation (not since boot)", () => {
    const m = createPlatformMetrics();
    // keep the event loop busy for 1.2 s: measured since creation, it was busy nearly all the time
    const until = Date.now() + 1_200;
    while (Date.now() < until);
    const cpu = m.cpuPercent();
    expect(cpu).toBeGreaterThan(70);
    expect(cpu).toBeLessThanOrEqual(100);
    const memory = m.memoryPercent();
    expect(memory).toBeGreaterThan(0);
    expect(memory).toBeLessThan(100);
    expect(m.host?.().memoryPercent).toBeGreaterThan(0);
  });

  it("a busy machine is information, not the platform's illness; a failing check is named with its reason", () => {
    let cpu = 12;
    const health = createHealthService({
      metrics: { cpuPercent: () => cpu, memoryPercent: () => 30, host: () => ({ cpuPercent: 99, memoryPercent: 97 }) },
    });
    expect(health.summary().health).toBe('healthy');
    const calm = health.detail();
    expect(calm).toMatchObject({ health: 'healthy', cpu: { percent: 99 }, memory: { percent: 97 } });
    expect(calm.reason).toMatch(/at or below 70%/);
    cpu = 92;
    const busy = health.detail();
    expect(busy.health).toBe('unhealthy');
    expect(busy.checks).toEqual([
      { name: 'cpu', status: 'unhealthy', percent: 92, reason: expect.stringContaining('busy 92% of the time') },
      { name: 'memory', status: 'healthy', percent: 30, reason: expect.any(String) },
    ]);
    expect(busy.reason).toMatch(/^cpu unhealthy: the platform's event loop was busy 92%/);
    expect(busy.reason).not.toMatch(/memory/);
  });
});
