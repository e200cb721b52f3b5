/**
 * Keys the embedded default needs but the operator did not set (CONFIG.md: "generated once and
 * kept in DATA_DIR, file mode 0600; an operator-set variable always wins").
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseKey } from '../lib/crypto.ts';
import { ConfigError, type Config } from './env.ts';

export type Secrets = {
  walletEncryptionKey: Buffer;
  secretsEncryptionKey: Buffer;
};

/**
 * Returns the value stored under `name` in DATA_DIR/secrets.json, generating and saving it (mode
 * 0600) on first use. Only called for values the operator did not set, so a deployment that sets
 * every key never writes to DATA_DIR.
 */
export function storedSecret(dataDir: string, name: string, make: () => string): string {
  const file = join(dataDir, 'secrets.json');
  let stored: Record<string, string> = {};
  try {
    stored = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new ConfigError(`${file}: ${(err as Error).message}`);
  }
  const existing = stored[name];
  if (existing) return existing;
  const value = make();
  stored[name] = value;
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, JSON.stringify(stored, null, 2) + '\n', { mode: 0o600 });
  chmodSync(file, 0o600);
  return value;
}

export function resolveSecrets(config: Pick<Config, 'DATA_DIR' | 'WALLET_ENCRYPTION_KEY' | 'SECRETS_ENCRYPTION_KEY'>): Secrets {
  const key = (envName: string, envValue: string | undefined, storedName: string): Buffer => {
    const value = envValue ?? storedSecret(config.DATA_DIR, storedName, () => randomBytes(32).toString('hex'));
    try {
      return parseKey(value);
    } catch (err) {
      throw new ConfigError(`Invalid configuration: ${envName} ${(err as Error).message}`);
    }
  };
  return {
    walletEncryptionKey: key('WALLET_ENCRYPTION_KEY', config.WALLET_ENCRYPTION_KEY, 'walletEncryptionKey'),
    secretsEncryptionKey: key('SECRETS_ENCRYPTION_KEY', config.SECRETS_ENCRYPTION_KEY, 'secretsEncryptionKey'),
  };
}
