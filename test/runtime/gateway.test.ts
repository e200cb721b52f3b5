/**
 * The built-in runtime's pieces in process: the §8 auth lockout window and its expiry, the
 * client IP taken from the connection (test/runtime/gateway-limits.test.ts has the hostile cases), the configuration merge, and upstream failures mapped to clear errors.
 */
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/config/limits.ts';
import { buildAgentConfig, deepMerge } from '../../src/lib/agent-config.ts';
import { createAuthGuard, isLoopback } from '../../src/runtime/auth-guard.ts';
import { createGateway } from '../../src/runtime/gateway.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';

describe('gateway auth guard (§8: 10 failures per 60 s, 5-minute lockout, loopback exempt)', () => {
  it('locks out on the 10th failure in a window and releases after the lockout', () => {
    let t = 1_000_000;
    const guard = createAuthGuard({ now: () => t });
    for (let i = 0; i < 9; i++) expect(guard.fail('203.0.113.7')).toBe(false);
    expect(guard.lockedFor('203.0.113.7')).toBe(0);
    expect(guard.fail('203.0.113.7')).toBe(true);
    expect(guard.lockedFor('203.0.113.7')).toBe(LIMITS.gatewayAuthLockoutMs);
    expect(guard.lockedFor('198.51.100.1')).toBe(0); // per IP
    t += LIMITS.gatewayAuthLockoutMs;
    expect(guard.lockedFor('203.0.113.7')).toBe(0);
    expect(guard.fail('203.0.113.7')).toBe(false); // a fresh window
  });

  it('counts failures per 60 s window', () => {
    let t = 0;
    const guard = createAuthGuard({ now: () => t });
    for (let i = 0; i < 9; i++) guard.fail('203.0.113.8');
    t += LIMITS.gatewayAuthWindowMs;
    expect(guard.fail('203.0.113.8')).toBe(false);
  });

  it('exempts loopback unless switched off', () => {
    const guard = createAuthGuard();
    for (let i = 0; i < 20; i++) guard.fail('127.0.0.1');
    expect(guard.lockedFor('127.0.0.1')).toBe(0);
    const strict = createAuthGuard({ loopbackExempt: false });
    for (let i = 0; i < 10; i++) strict.fail('::1');
    expect(strict.lockedFor('::1')).toBeGreaterThan(0);
    expect(isLoopback('::ffff:127.0.0.1')).toBe(true);
    expect(isLoopback('10.0.0.1')).toBe(false);
  });
});

describe('agent configuration file', () => {
  it('applies §2 defaults under and §8 fixed settings over the user configuration', () => {
    const config = buildAgentConfig(
      {
        tools: { profile: 'full', deny: [] },
        gateway: { mode: 'remote', port: 1, auth: { mode: 'none', token: 't' } },
        channels: { webchat: { enabled: false } },
      },
      { plan: 'solo', workspace: '/w', port: 18789 },
    ) as any;
    expect(config.tools.profile).toBe('messaging');
    expect(config.tools.deny).toEqual(['browser', 'canvas']);
    expect(config.tools.exec.allowedPaths).toEqual(['/w', '/tmp', '/home/node']);
    expect(config.gateway).toMatchObject({
      mode: 'local',
      bind: 'lan',
      port: 18789,
      auth: { mode: 'token' },
      controlUi: { enabled: true, allowedOrigins: ['*'] },
    });
    expect(config.gateway.auth.token).toBeUndefined();
    expect(config.channels.webchat.enabled).toBe(false); // a user setting the §8 list does not fix
    expect(config.skills.install.nodeManager).toBe('npm');
    expect(config.session.resetTriggers).toHaveLength(2);
  });

  it('ignores prototype keys', () => {
    const merged = deepMerge({}, JSON.parse('{"__proto__": {"polluted": true}}'));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(merged)).toEqual([]);
  });
});

describe('gateway in process', () => {
  let upstream: FakeOpenAi;
  let url: string;
  let close: () => Promise<unknown>;
  const token = 't'.repeat(48);

  beforeAll(async () => {
    upstream = await startFakeOpenAi();
    const { app } = await createGateway({
      gatewayToken: token,
      agentId: 'g1',
      model: { baseUrl: upstream.baseUrl, defaultModel: 'm', timeoutMs: 2_000 },
      logger: pino({ level: 'silent' }),
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    close = () => app.close();
  });
  afterAll(async () => {
    await close?.();
    await upstream?.close();
  });

  it('ignores X-Forwarded-For by default: the client is the connection (loopback here, so exempt), whatever it claims', async () => {
    const claimed = { 'x-forwarded-for': '203.0.113.50', authorization: 'Bearer nope' };
    for (let i = 0; i < 12; i++) expect((await fetch(`${url}/v1/stats`, { headers: claimed })).status).toBe(401);
    expect((await fetch(`${url}/v1/stats`, { headers: { ...claimed, authorization: `Bearer ${token}` } })).status).toBe(200);
  });

  it('maps upstream failures to 502 and passes 4xx through; counts them', async () => {
    const call = () =>
      fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }] }),
      });
    upstream.failWith = 500;
    expect((await call()).status).toBe(502);
    upstream.failWith = 429;
    const limited = await call();
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { error: { type: string } }).error.type).toBe('server_error');
    upstream.failWith = undefined;
    expect((await call()).status).toBe(200);
    const stats = (await (await fetch(`${url}/v1/stats`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
      messagesProcessed: number;
      messagesFailed: number;
    };
    expect(stats).toMatchObject({ messagesProcessed: 1, messagesFailed: 2 });
  });
});
