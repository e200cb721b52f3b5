import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, integrationsOff, isAdminEmail, loadConfig } from './env.ts';
import { resolveSecrets, storedSecret } from './secrets.ts';

const load = (env: Record<string, string>) => loadConfig(env, { readDotEnv: false });

describe('loadConfig (docs/configuration.md)', () => {
  it('applies the documented defaults', () => {
    const c = load({});
    expect(c.HOST).toBe('127.0.0.1');
    expect(c.WEB_PORT).toBe(3000);
    expect(c.BACKEND_PORT).toBe(3001);
    expect(c.PUBLIC_URL).toBe('http://localhost:3000');
    expect(c.BACKEND_URL).toBe('http://127.0.0.1:3001');
    expect(c.REGISTER_RATE_LIMIT).toBe(5);
    expect(c.SIWE_CHAIN_ID).toBe(8453);
    expect(c.HOSTING_DRIVER).toBe('local');
    expect(c.TRUST_PROXY).toBe(false);
    expect(c.secureCookies).toBe(false);
    expect(c.configured.internalApiKey).toBe(false);
    expect(c.configured.turnstile).toBe(false);
  });

  it('derives PUBLIC_URL from WEB_PORT and Secure cookies from an https PUBLIC_URL', () => {
    expect(load({ WEB_PORT: '4000' }).PUBLIC_URL).toBe('http://localhost:4000');
    expect(load({ PUBLIC_URL: 'https://agents.example.com/' }).secureCookies).toBe(true);
    expect(load({ PUBLIC_URL: 'https://agents.example.com/' }).PUBLIC_URL).toBe('https://agents.example.com');
  });

  it.each([
    ['TRUST_PROXY', 'yes', /TRUST_PROXY/],
    ['WEB_PORT', 'eighty', /WEB_PORT/],
    ['WEB_PORT', '70000', /WEB_PORT/],
    ['PUBLIC_URL', 'not a url', /PUBLIC_URL must be a URL/],
    ['HOSTING_DRIVER', 'ftp', /HOSTING_DRIVER/],
    ['REGISTER_RATE_LIMIT', '-1', /REGISTER_RATE_LIMIT/],
  ])('rejects %s=%s with one line naming the variable', (name, value, pattern) => {
    let error: unknown;
    try {
      load({ [name]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(pattern);
    expect((error as Error).message).not.toContain('\n');
  });

  it('booleans accept true/false/1/0 only', () => {
    expect(load({ TEMPO_TESTNET: '1' }).TEMPO_TESTNET).toBe(true);
    expect(load({ TEMPO_TESTNET: 'false' }).TEMPO_TESTNET).toBe(false);
    expect(() => load({ TEMPO_TESTNET: 'on' })).toThrow(ConfigError);
  });

  it('TRUST_PROXY: true/1 trusts loopback proxies only (never everyone); addresses, CIDRs, names or a hop count; nonsense stops start-up', () => {
    expect(load({}).TRUST_PROXY).toBe(false);
    expect(load({ TRUST_PROXY: 'false' }).TRUST_PROXY).toBe(false);
    expect(load({ TRUST_PROXY: '0' }).TRUST_PROXY).toBe(false);
    expect(load({ TRUST_PROXY: 'true' }).TRUST_PROXY).toEqual(['loopback']);
    expect(load({ TRUST_PROXY: '1' }).TRUST_PROXY).toEqual(['loopback']);
    expect(load({ TRUST_PROXY: '2' }).TRUST_PROXY).toBe(2);
    expect(load({ TRUST_PROXY: '10.0.0.0/8, 192.168.1.5,::1,fd00::/8,uniquelocal' }).TRUST_PROXY).toEqual([
      '10.0.0.0/8',
      '192.168.1.5',
      '::1',
      'fd00::/8',
      'uniquelocal',
    ]);
    for (const bad of ['on', 'yes', '10.0.0.0/33', '10.0.0/8', 'proxy.example.com', '10.0.0.1/8/1', '::1/129']) {
      expect(() => load({ TRUST_PROXY: bad }), bad).toThrow(/TRUST_PROXY/);
    }
  });

  it('reads .env from the working directory; real variables win', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    writeFileSync(join(dir, '.env'), 'WEB_PORT=4100\nBACKEND_PORT=4101\n');
    const c = loadConfig({ BACKEND_PORT: '4200' }, { cwd: dir });
    expect(c.WEB_PORT).toBe(4100);
    expect(c.BACKEND_PORT).toBe(4200);
  });

  it('compares admin emails case-insensitively', () => {
    const c = load({ ADMIN_EMAILS: 'Boss@Example.com, ops@example.com' });
    expect(isAdminEmail(c, 'boss@example.COM')).toBe(true);
    expect(isAdminEmail(c, 'other@example.com')).toBe(false);
    expect(isAdminEmail(c, undefined)).toBe(false);
  });
});

describe('generated secrets (docs/configuration.md: generated once into DATA_DIR, mode 0600)', () => {
  it('generates keys once, with mode 0600, and reuses them', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sec-'));
    const a = resolveSecrets({ DATA_DIR: dir, WALLET_ENCRYPTION_KEY: undefined, SECRETS_ENCRYPTION_KEY: undefined });
    const b = resolveSecrets({ DATA_DIR: dir, WALLET_ENCRYPTION_KEY: undefined, SECRETS_ENCRYPTION_KEY: undefined });
    expect(a.walletEncryptionKey).toHaveLength(32);
    expect(a.walletEncryptionKey.equals(b.walletEncryptionKey)).toBe(true);
    expect(a.walletEncryptionKey.equals(a.secretsEncryptionKey)).toBe(false);
    expect(statSync(join(dir, 'secrets.json')).mode & 0o777).toBe(0o600);
  });

  it('an operator-set key wins and nothing is written when every key is set', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sec-'));
    const hex = 'ab'.repeat(32);
    const s = resolveSecrets({ DATA_DIR: dir, WALLET_ENCRYPTION_KEY: hex, SECRETS_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64') });
    expect(s.walletEncryptionKey.toString('hex')).toBe(hex);
    expect(s.secretsEncryptionKey.equals(Buffer.alloc(32, 7))).toBe(true);
    expect(() => statSync(join(dir, 'secrets.json'))).toThrow();
  });

  it('rejects a key that is not 32 bytes with the variable name', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sec-'));
    expect(() => resolveSecrets({ DATA_DIR: dir, WALLET_ENCRYPTION_KEY: 'short', SECRETS_ENCRYPTION_KEY: undefined })).toThrow(
      /WALLET_ENCRYPTION_KEY/,
    );
  });

  it('with DATABASE_URL a missing key is never generated per process: web and backend would disagree', () => {
    const web = mkdtempSync(join(tmpdir(), 'sec-web-'));
    const backend = mkdtempSync(join(tmpdir(), 'sec-backend-'));
    const shared = { DATABASE_URL: 'postgres://db.example/platform', WALLET_ENCRYPTION_KEY: undefined, SECRETS_ENCRYPTION_KEY: undefined };
    for (const dir of [web, backend]) {
      expect(() => resolveSecrets({ ...shared, DATA_DIR: dir })).toThrow(
        /^Missing configuration: WALLET_ENCRYPTION_KEY must be set when DATABASE_URL is set/,
      );
      expect(() => statSync(join(dir, 'secrets.json'))).toThrow(); // nothing generated
    }
    // the same keys in both processes' environment: both decrypt what the other wrote
    const keys = { WALLET_ENCRYPTION_KEY: 'cd'.repeat(32), SECRETS_ENCRYPTION_KEY: 'ef'.repeat(32) };
    const a = resolveSecrets({ ...shared, ...keys, DATA_DIR: web });
    const b = resolveSecrets({ ...shared, ...keys, DATA_DIR: backend });
    expect(a.secretsEncryptionKey.equals(b.secretsEncryptionKey)).toBe(true);
  });

  it('with DATABASE_URL a key generated earlier into DATA_DIR is still used, with a warning', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sec-'));
    const before = resolveSecrets({ DATA_DIR: dir, WALLET_ENCRYPTION_KEY: undefined, SECRETS_ENCRYPTION_KEY: undefined });
    const warnings: string[] = [];
    const after = resolveSecrets(
      { DATA_DIR: dir, DATABASE_URL: 'postgres://db/p', WALLET_ENCRYPTION_KEY: undefined, SECRETS_ENCRYPTION_KEY: undefined },
      (l) => warnings.push(l),
    );
    expect(after.walletEncryptionKey.equals(before.walletEncryptionKey)).toBe(true);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/WALLET_ENCRYPTION_KEY is not set: using the key generated earlier/);
  });

  it('storedSecret keeps other values in the same file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sec-'));
    storedSecret(dir, 'one', () => '1');
    storedSecret(dir, 'two', () => '2');
    expect(storedSecret(dir, 'one', () => 'changed')).toBe('1');
    expect(JSON.parse(readFileSync(join(dir, 'secrets.json'), 'utf8'))).toEqual({ one: '1', two: '2' });
  });

  it('integrationsOff names the bridge and the hosting webhook (closed without their secrets) and other unset integrations', () => {
    const off = integrationsOff(load({}));
    expect(off).toContain('bridge (BRIDGE_SECRET)');
    expect(off).toContain('hosting status webhook (HOSTING_WEBHOOK_SECRET)');
    const on = integrationsOff(load({ BRIDGE_SECRET: 'b', HOSTING_WEBHOOK_SECRET: 'h' }));
    expect(on.some((o) => o.startsWith('bridge') || o.startsWith('hosting status webhook'))).toBe(false);
  });
});
