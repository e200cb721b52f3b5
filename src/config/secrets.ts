/**
 * Keys the embedded default needs but the operator did not set (docs/configuration.md: generated once
 * into DATA_DIR, file mode 0600; an operator-set variable always wins).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseKey } from '../lib/crypto.ts';
import { type Config, ConfigError } from './env.ts';

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
  writeFileSync(file, `${JSON.stringify(stored, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return value;
}

/** A value already stored in DATA_DIR/secrets.json, or undefined (never generates). */
function readStoredSecret(dataDir: string, name: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as Record<string, string>)[name] || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The encryption keys. With the embedded database (one process owns DATA_DIR) a missing key is
 * generated once into DATA_DIR. With DATABASE_URL, web and backend processes (and replicas) share
 * one database but not one DATA_DIR: a key generated per process would make every process unable
 * to decrypt what another wrote ("unable to authenticate data"). So a missing key is never
 * generated then: a key an earlier version generated into this DATA_DIR is still used (with a
 * warning to move it to the environment), otherwise start-up stops with one line saying what to set.
 */
export function resolveSecrets(
  config: Pick<Config, 'DATA_DIR' | 'WALLET_ENCRYPTION_KEY' | 'SECRETS_ENCRYPTION_KEY'> & { DATABASE_URL?: string | undefined },
  warn: (line: string) => void = () => {},
): Secrets {
  const shared = config.DATABASE_URL !== undefined;
  const key = (envName: string, envValue: string | undefined, storedName: string): Buffer => {
    let value = envValue;
    if (value === undefined && shared) {
      value = readStoredSecret(config.DATA_DIR, storedName);
      if (value === undefined) {
        throw new ConfigError(
          `Missing configuration: ${envName} must be set when DATABASE_URL is set (every web and backend process must use the same key; generate one with: openssl rand -hex 32)`,
        );
      }
      warn(
        `${envName} is not set: using the key generated earlier in ${join(config.DATA_DIR, 'secrets.json')}; set ${envName} to that value in every process sharing DATABASE_URL`,
      );
    }
    value ??= storedSecret(config.DATA_DIR, storedName, () => randomBytes(32).toString('hex'));
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
