import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config/env.ts';
import { createProviders } from '../domains/ai/index.ts';
import { featureLines, hostingLine, modelProviderLine } from './start-up-report.ts';

const load = (env: Record<string, string>) => loadConfig(env, { readDotEnv: false });
/** the line for the providers the platform builds from these settings, as main.ts reads them */
const providerLine = (env: Record<string, string>) => {
  const config = load(env);
  return modelProviderLine(config, createProviders(config));
};

describe('the start-up block names the model provider', () => {
  it("the router by ROUTER_BASE_URL's host, other providers by their key, the custom one with its model", () => {
    expect(providerLine({ ROUTER_API_KEY: 'k', ROUTER_BASE_URL: 'http://127.0.0.1:4010/v1' })).toEqual({
      level: 'info',
      msg: 'model provider: router at 127.0.0.1:4010 (ROUTER_BASE_URL)',
      fields: { providers: ['router'] },
    });
    expect(providerLine({ ANTHROPIC_API_KEY: 'a', AI_CUSTOM_BASE_URL: 'http://llm.lan:8000/v1', AI_CUSTOM_MODEL: 'qwen' }).msg).toBe(
      'model providers: anthropic at api.anthropic.com (ANTHROPIC_API_KEY); custom at llm.lan:8000 (AI_CUSTOM_BASE_URL, model custom/qwen)',
    );
  });

  it('or warns that agents cannot answer without one (a router address without its key is not one)', () => {
    const envs: Record<string, string>[] = [{}, { ROUTER_BASE_URL: 'http://127.0.0.1:4010/v1' }];
    for (const env of envs)
      expect(providerLine(env)).toEqual({
        level: 'warn',
        msg: 'no model provider configured: agents cannot answer; set ROUTER_BASE_URL and ROUTER_API_KEY or a provider key (docs/configuration.md)',
      });
  });
});

describe('where agents run', () => {
  it('the local driver speaks for its own sandbox; a container driver is named, and one that cannot work without its key says so', () => {
    expect(hostingLine(load({}))).toBeUndefined();
    expect(hostingLine(load({ HOSTING_DRIVER: 'docker' }))?.msg).toMatch(/^agents run in containers of their own on Docker/);
    expect(hostingLine(load({ HOSTING_DRIVER: 'render' }))).toMatchObject({
      level: 'warn',
      msg: expect.stringMatching(/^HOSTING_DRIVER=render without HOSTING_API_KEY: agents cannot be provisioned/),
    });
    expect(hostingLine(load({ HOSTING_DRIVER: 'render', HOSTING_API_KEY: 'k' }))?.msg).toMatch(/on Render/);
  });
});

describe('a feature off for lack of a setting says so in one line', () => {
  const msgs = (env: Record<string, string>) => featureLines(load(env)).map((l) => `${l.level} ${l.msg}`);

  it('no SMTP: reset e-mails are off, and the admin command that issues a link instead', () => {
    expect(msgs({}).find((m) => m.includes('SMTP_URL'))).toMatch(
      /^warn password reset e-mails are off \(SMTP_URL unset\): .*npm run admin -- reset-link <email>/,
    );
    expect(msgs({ SMTP_URL: 'smtp://u:p@mail.example.com:587' }).some((m) => m.includes('SMTP_URL'))).toBe(false);
  });

  it('no Stripe key: card top-ups are off and every account gets DEFAULT_PLAN; a key without its webhook secret is a warning', () => {
    expect(msgs({ DEFAULT_PLAN: 'label' }).find((m) => m.includes('STRIPE'))).toMatch(
      /^info card payments are off \(STRIPE_SECRET_KEY unset\): no card top-ups .*the label plan/,
    );
    expect(msgs({ STRIPE_SECRET_KEY: 'sk_test_x' }).find((m) => m.includes('STRIPE'))).toMatch(
      /^warn STRIPE_WEBHOOK_SECRET is not set: .*never credited/,
    );
    expect(msgs({ STRIPE_SECRET_KEY: 'sk_test_x', STRIPE_WEBHOOK_SECRET: 'whsec_x' }).some((m) => m.includes('STRIPE'))).toBe(false);
  });

  it('the other integrations that are off follow in one line, without those named above', () => {
    const other = msgs({}).filter((m) => m.includes('other integrations off'));
    expect(other).toHaveLength(1);
    expect(other[0]).toContain('bridge (BRIDGE_SECRET)');
    expect(other[0]).not.toMatch(/SMTP_URL|STRIPE|ROUTER/);
  });
});
