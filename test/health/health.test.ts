/**
 * §4.12 health: web GET /api/health (thresholds 70% / 85%, §8), admin-only hardware detail at
 * /api/admin/health (§5 admin check, 403 ADMIN_REQUIRED), and the backend GET /health shape.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SystemMetrics } from '../../src/domains/health/health.service.ts';
import { signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const isoNow = (s: unknown) =>
  typeof s === 'string' && !Number.isNaN(Date.parse(s)) && Math.abs(Date.parse(s) - Date.now()) < 60_000 && s === new Date(s).toISOString();

describe('§4.12 GET /api/health (none)', () => {
  let cpu = 10;
  let memory = 10;
  let fail = false;
  const metrics: SystemMetrics = {
    cpuPercent: () => {
      if (fail) throw new Error('cannot read /proc/stat');
      return cpu;
    },
    memoryPercent: () => memory,
  };
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform({}, { metrics });
  });
  afterAll(() => t.close());
  const get = () => t.web.inject({ method: 'GET', url: '/api/health' });

  it('200 {status:"ok", health, timestamp} and nothing else (hardware fields are admin-only)', async () => {
    cpu = 10;
    memory = 10;
    const res = await get();
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['health', 'status', 'timestamp']);
    expect(body.status).toBe('ok');
    expect(body.health).toBe('healthy');
    expect(isoNow(body.timestamp)).toBe(true);
  });

  it.each([
    // [cpu, memory, expected]: "healthy when CPU and memory are both at or below 70%; degraded above 70% and at or below 85%; unhealthy above 85%"
    [0, 0, 'healthy'],
    [70, 70, 'healthy'],
    [70, 10, 'healthy'],
    [10, 70, 'healthy'],
    [70.01, 10, 'degraded'],
    [71, 10, 'degraded'],
    [10, 71, 'degraded'],
    [85, 85, 'degraded'],
    [85, 10, 'degraded'],
    [10, 85, 'degraded'],
    [85.01, 10, 'unhealthy'],
    [86, 10, 'unhealthy'],
    [10, 86, 'unhealthy'],
    [71, 86, 'unhealthy'],
    [100, 100, 'unhealthy'],
  ])('cpu %s percent, memory %s percent → %s', async (c, m, expected) => {
    cpu = c;
    memory = m;
    const res = await get();
    expect(res.statusCode).toBe(200);
    expect(res.json().health).toBe(expected);
    expect(res.json().status).toBe('ok');
  });

  it('a collection failure → 500 {status:"error", health:"unhealthy", timestamp}', async () => {
    fail = true;
    try {
      const res = await get();
      expect(res.statusCode).toBe(500);
      const body = res.json();
      expect(Object.keys(body).sort()).toEqual(['health', 'status', 'timestamp']);
      expect(body).toMatchObject({ status: 'error', health: 'unhealthy' });
      expect(isoNow(body.timestamp)).toBe(true);
    } finally {
      fail = false;
    }
  });

  it("a busy machine does not make the platform unhealthy: only the platform's own CPU and memory count, and nothing more is shown", async () => {
    const busyHost = await startTestPlatform({}, { metrics: { ...metrics, host: () => ({ cpuPercent: 100, memoryPercent: 99 }) } });
    try {
      cpu = 10;
      memory = 10;
      const res = await busyHost.web.inject({ method: 'GET', url: '/api/health' });
      expect(res.json()).toEqual({ status: 'ok', health: 'healthy', timestamp: expect.any(String) });
    } finally {
      await busyHost.close();
    }
  });

  it('the real OS metrics (no override) answer 200 with a valid health value', async () => {
    await withTestPlatform({}, async (t2) => {
      const res = await t2.web.inject({ method: 'GET', url: '/api/health' });
      expect(res.statusCode).toBe(200);
      expect(['healthy', 'degraded', 'unhealthy']).toContain(res.json().health);
    });
  });
});

describe('§4.12 GET /api/admin/health (hardware fields, admins only)', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform(
      { ADMIN_EMAILS: 'Root@Example.com, ops@example.com', ADMIN_EMAILS_REQUIRE_VERIFIED: 'false', REGISTER_RATE_LIMIT: '1000' },
      // the platform's own CPU degraded; the machine's CPU and memory far above any threshold (other programs)
      { metrics: { cpuPercent: () => 72.34, memoryPercent: () => 40, host: () => ({ cpuPercent: 99, memoryPercent: 95 }) } },
    );
  });
  afterAll(() => t.close());
  const get = (cookie?: string) => t.web.inject({ method: 'GET', url: '/api/admin/health', headers: cookie ? { cookie } : {} });

  it('without a session → 401 {error}', async () => {
    const res = await get();
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });

  it('with a garbage cookie → 401', async () => {
    expect((await get('service-session=nonsense')).statusCode).toBe(401);
  });

  it('a signed-in non-admin → 403 {error, code:"ADMIN_REQUIRED"} (§5, §7)', async () => {
    const u = await signUp(t.web, { email: 'someone@example.com' });
    const res = await get(u.cookie);
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ error: expect.any(String), code: 'ADMIN_REQUIRED' });
  });

  it('an admin (ADMIN_EMAILS, case-insensitive) → 200 with the summary and hardware fields', async () => {
    const admin = await signUp(t.web, { email: 'ROOT@example.com' });
    const res = await get(admin.cookie);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      status: 'ok',
      health: 'degraded',
      // the failing check, named, with what it measured; the other check passes
      reason: expect.stringMatching(/^cpu degraded: the platform's event loop was busy 72\.3% of the time/),
      checks: [
        { name: 'cpu', status: 'degraded', percent: 72.3, reason: expect.any(String) },
        { name: 'memory', status: 'healthy', percent: 40, reason: expect.any(String) },
      ],
      // the machine's, as information: 99% and 95% do not make the platform unhealthy
      cpu: { percent: 99, cores: expect.any(Number), loadAverage: expect.any(Array) },
      memory: { percent: 95, totalBytes: expect.any(Number), freeBytes: expect.any(Number) },
      process: {
        rssBytes: expect.any(Number),
        heapUsedBytes: expect.any(Number),
        heapLimitBytes: expect.any(Number),
        uptimeSeconds: expect.any(Number),
        node: expect.stringMatching(/^v\d+/),
      },
      system: { platform: expect.any(String), arch: expect.any(String), uptimeSeconds: expect.any(Number) },
    });
    expect(body.cpu.cores).toBeGreaterThan(0);
    expect(body.memory.totalBytes).toBeGreaterThan(0);
    expect(isoNow(body.timestamp)).toBe(true);
  });

  it('after the admin signs out, the old cookie → 401', async () => {
    const admin = await signUp(t.web, { email: 'Ops@Example.com' });
    expect((await get(admin.cookie)).statusCode).toBe(200);
    await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: admin.cookie } });
    expect((await get(admin.cookie)).statusCode).toBe(401);
  });
});

describe('§4.12 backend GET /health (none, always 200)', () => {
  const expectShape = (body: Record<string, unknown>) => {
    expect(body).toMatchObject({ status: 'ok', provider: expect.any(String) });
    expect(isoNow(body.timestamp)).toBe(true);
    for (const k of ['status', 'timestamp', 'docker', 'provisioning', 'provider']) expect(body).toHaveProperty(k);
  };

  it('local driver → docker "available", provisioning "enabled"; no key needed', async () => {
    await withTestPlatform({ INTERNAL_API_KEY: '' }, async (t) => {
      const res = await t.backend.inject({ method: 'GET', url: '/health' });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expectShape(body);
      expect(body.docker).toBe('available');
      expect(body.provisioning).toBe('enabled');
    });
  });

  it('HOSTING_DRIVER=render without HOSTING_API_KEY → "unavailable"/"disabled", still 200; provider is the same fixed string', async () => {
    const local = await startTestPlatform();
    const t = await startTestPlatform({ HOSTING_DRIVER: 'render' });
    try {
      const res = await t.backend.inject({ method: 'GET', url: '/health' });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expectShape(body);
      expect(body.docker).toBe('unavailable');
      expect(body.provisioning).toBe('disabled');
      const localBody = (await local.backend.inject({ method: 'GET', url: '/health' })).json();
      expect(body.provider).toBe(localBody.provider);
    } finally {
      await t.close();
      await local.close();
    }
  });

  it('HOSTING_DRIVER=render with HOSTING_API_KEY → "available"/"enabled"', async () => {
    const t = await startTestPlatform({ HOSTING_DRIVER: 'render', HOSTING_API_KEY: 'rnd_test' });
    try {
      const body = (await t.backend.inject({ method: 'GET', url: '/health' })).json();
      expect(body.docker).toBe('available');
      expect(body.provisioning).toBe('enabled');
    } finally {
      await t.close();
    }
  });

  it('the backend does not serve the web /api/health path (separate apps)', async () => {
    await withTestPlatform({}, async (t) => {
      expect((await t.backend.inject({ method: 'GET', url: '/api/health' })).statusCode).toBe(404);
    });
  });
});
