/**
 * OpenClaw's configuration file as the local driver writes it (no OpenClaw needed): §8 "Agent
 * container settings" in OpenClaw's vocabulary, no secret, only keys OpenClaw's strict schema
 * knows at the top level. The file passing OpenClaw's own `config validate` and the agent running
 * with it are proved by `npm run test:openclaw` (test/openclaw/openclaw.e2e.ts).
 */
import { describe, expect, it } from 'vitest';
import { buildOpenClawConfig } from '../../src/domains/agents/drivers/openclaw-config.rules.ts';

const base = {
  workspace: '/data/agents/a1/workspace',
  port: 40123,
  bind: 'loopback' as const,
  modelBaseUrl: 'http://127.0.0.1:9/v1',
  modelApiKey: true,
  model: 'gpt-4',
};

describe('OpenClaw configuration (§8 agent container settings)', () => {
  it('tools profile by plan: messaging for solo, coding otherwise; browser and canvas denied; shell allow-list; files held to the workspace', () => {
    for (const [plan, profile] of [
      ['solo', 'messaging'],
      ['collective', 'coding'],
      ['label', 'coding'],
      ['network', 'coding'],
    ] as const) {
      const cfg = buildOpenClawConfig({}, { ...base, plan }) as any;
      expect(cfg.tools.profile).toBe(profile);
      expect(cfg.tools.deny).toEqual(['browser', 'canvas']);
      expect(cfg.tools.exec).toEqual({ security: 'allowlist', ask: 'off' });
      expect(cfg.tools.fs).toEqual({ workspaceOnly: true });
    }
  });

  it('gateway: local mode, token auth read from the environment, trusted proxy, chat completions and Control UI on', () => {
    const cfg = buildOpenClawConfig({}, { ...base, plan: 'solo' }) as any;
    expect(cfg.gateway).toEqual({
      mode: 'local',
      bind: 'loopback',
      port: 40123,
      auth: { mode: 'token', allowTailscale: true, token: { source: 'env', provider: 'default', id: 'OPENCLAW_GATEWAY_TOKEN' } },
      trustedProxies: ['127.0.0.1'],
      http: { endpoints: { chatCompletions: { enabled: true } } },
      controlUi: { enabled: true, allowedOrigins: ['*'] },
    });
    expect((buildOpenClawConfig({}, { ...base, plan: 'solo', bind: 'lan' }) as any).gateway.bind).toBe('lan');
  });

  it('a user cannot override the fixed settings, nor put a token or password into the file', () => {
    const user = {
      tools: { profile: 'full', deny: [], exec: { security: 'full' }, fs: { workspaceOnly: false } },
      gateway: {
        mode: 'remote',
        auth: { mode: 'none', token: 'user-token', password: 'pw' },
        http: { endpoints: { chatCompletions: { enabled: false } } },
      },
    };
    const cfg = buildOpenClawConfig(user, { ...base, plan: 'solo' }) as any;
    expect(cfg.tools).toMatchObject({
      profile: 'messaging',
      deny: ['browser', 'canvas'],
      exec: { security: 'allowlist', ask: 'off' },
      fs: { workspaceOnly: true },
    });
    expect(cfg.gateway.mode).toBe('local');
    expect(cfg.gateway.auth).toEqual({
      mode: 'token',
      allowTailscale: true,
      token: { source: 'env', provider: 'default', id: 'OPENCLAW_GATEWAY_TOKEN' },
    });
    expect(cfg.gateway.http.endpoints.chatCompletions.enabled).toBe(true);
    expect(JSON.stringify(cfg)).not.toMatch(/user-token|"pw"/);
  });

  it('the platform model router is the only provider; its key stays in the environment', () => {
    const cfg = buildOpenClawConfig({}, { ...base, plan: 'solo' }) as any;
    expect(cfg.models).toEqual({
      mode: 'replace',
      catalogRefresh: { enabled: false },
      providers: {
        platform: {
          baseUrl: 'http://127.0.0.1:9/v1',
          api: 'openai-completions',
          apiKey: { source: 'env', provider: 'default', id: 'AGENT_MODEL_API_KEY' },
          models: [{ id: 'gpt-4', name: 'gpt-4' }],
        },
      },
    });
    expect(cfg.agents.defaults).toEqual({ model: 'platform/gpt-4', workspace: base.workspace });
    const noKey = buildOpenClawConfig({}, { ...base, plan: 'solo', modelApiKey: false }) as any;
    expect(noKey.models.providers.platform.apiKey).toBeUndefined();
    const noRouter = buildOpenClawConfig({}, { ...base, plan: 'solo', modelBaseUrl: undefined }) as any;
    expect(noRouter.models).toEqual({ catalogRefresh: { enabled: false } });
  });

  it('no update checks, statistics or LAN advertising', () => {
    const cfg = buildOpenClawConfig({ update: { checkOnStart: true }, telemetry: { enabled: true } }, { ...base, plan: 'solo' }) as any;
    expect(cfg.update).toEqual({ checkOnStart: false, auto: { enabled: false } });
    expect(cfg.telemetry).toEqual({ enabled: false });
    expect(cfg.discovery).toEqual({ mdns: { mode: 'off' } });
    expect(cfg.models.catalogRefresh).toEqual({ enabled: false });
  });

  it('keeps only top-level keys OpenClaw knows: the platform fields of a stored configuration are left out, its model used', () => {
    const cfg = buildOpenClawConfig(
      { name: 'My agent', aiProvider: 'router', model: 'claude-x', channels: { webchat: { enabled: true } }, session: { dmScope: 'main' } },
      { ...base, plan: 'solo', model: undefined },
    ) as any;
    expect(Object.keys(cfg).sort()).toEqual([
      'agents',
      'discovery',
      'gateway',
      'logging',
      'models',
      'session',
      'skills',
      'telemetry',
      'tools',
      'update',
    ]);
    expect(cfg.agents.defaults.model).toBe('platform/claude-x');
    expect(cfg.models.providers.platform.models).toEqual([{ id: 'claude-x', name: 'claude-x' }]);
    expect(cfg.session.dmScope).toBe('main');
  });
});
