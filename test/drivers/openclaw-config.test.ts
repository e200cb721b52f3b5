/**
 * OpenClaw's configuration file as the local driver writes it (no OpenClaw needed): §8 "Agent
 * container settings" in OpenClaw's vocabulary, no secret, only keys OpenClaw's strict schema
 * knows at the top level; the §8 tool limits and the §2 skill limit in OpenClaw's keys
 * (docs/agents.md "OpenClaw"). Where OpenClaw is installed (`npm run test:openclaw` installs it
 * into DATA_DIR/openclaw; OPENCLAW_TEST_DATA_DIR names another place) its own `config validate`
 * must accept the file as written for every plan. The agent running with it is proved by
 * `npm run test:openclaw` (test/openclaw/openclaw.e2e.ts).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/config/limits.ts';
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
    expect(cfg.agents.defaults).toEqual({ model: 'platform/gpt-4', workspace: base.workspace, skills: [], imageMaxDimensionPx: 1200 });
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

/** A user's configuration that asks for everything: more skills than any plan, larger tool limits, loop detection off. */
const greedy = () => ({
  agents: {
    defaults: { skills: Array.from({ length: 120 }, (_, i) => `skill-${i}`), imageMaxDimensionPx: 4000 },
    entries: { main: { default: true, skills: ['a', 'b', 'c', 'd', 'e'], tools: { loopDetection: { enabled: false } } } },
  },
  skills: {
    allowBundled: Array.from({ length: 120 }, (_, i) => `bundled-${i}`),
    entries: Object.fromEntries(Array.from({ length: 120 }, (_, i) => [`opt-${i}`, { enabled: true }])),
    limits: { maxSkillsInPrompt: 1000, maxSkillsPromptChars: 9000 },
  },
  tools: { web: { fetch: { maxChars: 1_000_000, maxCharsCap: 1_000_000, timeoutSeconds: 20 } }, loopDetection: { enabled: false } },
});

/** OpenClaw's layers that widen a profile (its docs/gateway/config-tools/tool-policy.md) */
const widening = () => ({
  tools: {
    allow: ['exec'],
    alsoAllow: ['exec', 'browser', 'gateway'],
    byProvider: { platform: { profile: 'full' } },
    elevated: { enabled: true },
    codeMode: { enabled: true },
    web: { fetch: { maxChars: 1000 } },
  },
  agents: {
    entries: {
      main: {
        tools: {
          profile: 'full',
          allow: ['exec'],
          alsoAllow: ['exec'],
          exec: { security: 'full' },
          fs: { workspaceOnly: false },
          deny: ['cron'],
          loopDetection: { enabled: false },
        },
      },
    },
  },
});

describe('the tool policy is the platform’s (§8 profile and denials)', () => {
  it('a user cannot widen it: allow, alsoAllow, byProvider, elevated, codeMode and an agent entry’s own profile are dropped; what narrows stays', () => {
    const user = widening();
    const before = JSON.stringify(user);
    const cfg = buildOpenClawConfig(user, { ...base, plan: 'solo' }) as any;
    expect(Object.keys(cfg.tools).sort()).toEqual(['deny', 'exec', 'fs', 'loopDetection', 'profile', 'web']);
    expect(cfg.tools).toMatchObject({ profile: 'messaging', deny: ['browser', 'canvas'], exec: { security: 'allowlist' } });
    expect(cfg.tools.web.fetch.maxChars).toBe(1000);
    expect(cfg.agents.entries.main.tools).toEqual({ deny: ['cron'], loopDetection: { enabled: true } });
    expect(JSON.stringify(cfg)).not.toMatch(/"full"|alsoAllow|byProvider|elevated|codeMode/);
    // the stored configuration is not changed in place
    expect(JSON.stringify(user)).toBe(before);
  });
});

describe('§8 tool limits in OpenClaw keys', () => {
  it('web output 50,000 chars (maxChars and the hard maxCharsCap), loop detection on, images at most 1200 px: for every plan, whatever the user asked', () => {
    expect(LIMITS.toolWebOutputMaxChars).toBe(50_000);
    expect(LIMITS.imageMaxDimensionPx).toBe(1200);
    for (const plan of ['solo', 'collective', 'label', 'network']) {
      for (const user of [{}, greedy()]) {
        const cfg = buildOpenClawConfig(user, { ...base, plan }) as any;
        expect(cfg.tools.web.fetch).toMatchObject({ maxChars: 50_000, maxCharsCap: 50_000 });
        expect(cfg.tools.loopDetection).toEqual({ enabled: true });
        expect(cfg.agents.defaults.imageMaxDimensionPx).toBe(1200);
      }
    }
    const greedyCfg = buildOpenClawConfig(greedy(), { ...base, plan: 'network' }) as any;
    // a user's other settings of the same objects stay; a per-agent entry cannot turn loop detection off
    expect(greedyCfg.tools.web.fetch.timeoutSeconds).toBe(20);
    expect(greedyCfg.agents.entries.main.tools.loopDetection).toEqual({ enabled: true });
  });

  it("a user's lower values are kept (they are within the limits)", () => {
    const cfg = buildOpenClawConfig(
      { tools: { web: { fetch: { maxChars: 8000 } } }, agents: { defaults: { imageMaxDimensionPx: 800 } } },
      { ...base, plan: 'solo' },
    ) as any;
    expect(cfg.tools.web.fetch).toEqual({ maxChars: 8000, maxCharsCap: 50_000 });
    expect(cfg.agents.defaults.imageMaxDimensionPx).toBe(800);
  });
});

describe('§2 skill limit in OpenClaw keys', () => {
  it('the agent has the skills its configuration names (agents.defaults.skills), none when it names none; the model is shown at most the plan’s number', () => {
    for (const [plan, cap] of [
      ['solo', 3],
      ['collective', 10],
      ['label', 25],
      ['network', 100],
      ['starter', 3],
    ] as const) {
      const cfg = buildOpenClawConfig({}, { ...base, plan }) as any;
      expect(cfg.agents.defaults.skills, plan).toEqual([]);
      expect(cfg.skills.limits.maxSkillsInPrompt, plan).toBe(cap);
    }
    const named = buildOpenClawConfig(
      { agents: { defaults: { skills: ['weather', 'healthcheck'] } }, skills: { limits: { maxSkillsInPrompt: 1 } } },
      { ...base, plan: 'label' },
    ) as any;
    expect(named.agents.defaults.skills).toEqual(['weather', 'healthcheck']);
    expect(named.skills).toEqual({ install: { nodeManager: 'npm' }, limits: { maxSkillsInPrompt: 1 } });
  });

  it('a stored configuration over the limit (saved before a move to a smaller plan) keeps its first names, across every agent entry; the user’s object untouched', () => {
    const user = greedy();
    const before = JSON.stringify(user);
    const cfg = buildOpenClawConfig(user, { ...base, plan: 'solo' }) as any;
    expect(cfg.agents.defaults.skills).toEqual(['skill-0', 'skill-1', 'skill-2']);
    expect(cfg.agents.entries.main.skills).toEqual([]);
    expect(cfg.skills.limits).toEqual({ maxSkillsInPrompt: 3, maxSkillsPromptChars: 9000 });
    expect(JSON.stringify(user)).toBe(before);

    const entries = buildOpenClawConfig(
      { agents: { defaults: { skills: ['a', 'b'] }, entries: { one: { skills: ['b', 'c'] }, two: { skills: ['d', 'a'] } } } },
      { ...base, plan: 'solo' },
    ) as any;
    expect(entries.agents.defaults.skills).toEqual(['a', 'b']);
    expect(entries.agents.entries.one.skills).toEqual(['b', 'c']);
    expect(entries.agents.entries.two.skills).toEqual(['a']);
  });
});

/** OpenClaw's launcher where `npm run test:openclaw` (or `npm run runtime:openclaw`) installed it, if anywhere. */
const launcher = [process.env.OPENCLAW_TEST_DATA_DIR, process.env.DATA_DIR, 'data']
  .filter((d): d is string => !!d)
  .map((d) => join(resolve(d), 'openclaw', 'node_modules', 'openclaw', 'openclaw.mjs'))
  .find((f) => existsSync(f));
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
/** OpenClaw 2026.9.6 needs Node >= 24.16 (the repository's own Node 24 under npm scripts) */
const nodeRunsOpenClaw = major > 24 || (major === 24 && minor >= 16);

describe.skipIf(!launcher || !nodeRunsOpenClaw)('OpenClaw accepts the written configuration (its own config validate)', () => {
  /** `openclaw <args>` over `config` (written to a file as the local driver does), its output */
  const openclaw = (config: any, ...args: string[]) => {
    const dir = mkdtempSync(join(tmpdir(), 'openclaw-config-test-'));
    try {
      const file = join(dir, 'openclaw.json');
      config.agents.defaults.workspace = join(dir, 'workspace');
      writeFileSync(file, JSON.stringify(config));
      const r = spawnSync(process.execPath, [launcher as string, ...args], {
        env: {
          PATH: process.env.PATH,
          HOME: dir,
          OPENCLAW_STATE_DIR: join(dir, 'state'),
          OPENCLAW_CONFIG_PATH: file,
          OPENCLAW_OFFLINE: '1',
          // the SecretRefs of the file, as the agent's environment has them
          OPENCLAW_GATEWAY_TOKEN: 'test-token',
          AGENT_MODEL_API_KEY: 'test-key',
          NO_COLOR: '1',
        },
        encoding: 'utf8',
        timeout: 60_000,
      });
      return `${r.stdout}${r.stderr}`;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  const validate = (config: unknown) => openclaw(config, 'config', 'validate');

  it('OpenClaw holds the skill limit: a solo agent whose stored configuration names 5 of its skills can see and call 3; naming none, none', () => {
    const five = { agents: { defaults: { skills: ['weather', 'healthcheck', 'clawhub', 'diagram-maker', 'meme-maker'] } } };
    const check = openclaw(buildOpenClawConfig(five, { ...base, plan: 'solo' }), 'skills', 'check');
    expect(check).toMatch(/Visible to model: 3\b/);
    expect(check).toMatch(/Available as command: 3\b/);
    const none = openclaw(buildOpenClawConfig({}, { ...base, plan: 'network' }), 'skills', 'check');
    expect(none).toMatch(/Visible to model: 0\b/);
    expect(none).toMatch(/Available as command: 0\b/);
  }, 120_000);

  it('for the smallest and the largest plan, with the greedy configuration cut down; and it refuses a key it does not know', () => {
    for (const plan of ['solo', 'network'])
      expect(validate(buildOpenClawConfig(greedy(), { ...base, plan })), plan).toContain('Config valid');
    // and with the widening layers taken out
    expect(validate(buildOpenClawConfig(widening(), { ...base, plan: 'solo' }))).toContain('Config valid');
    // the check can fail: a limit key OpenClaw 2026.9.6 does not have (docs/agents.md "OpenClaw")
    const wrong = buildOpenClawConfig({}, { ...base, plan: 'solo' }) as any;
    wrong.tools.loopDetection.windowMinutes = 5;
    expect(validate(wrong)).not.toContain('Config valid');
  }, 120_000);
});
