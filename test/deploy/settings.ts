/**
 * Names and values the deployment artefacts give the platform, checked against the one schema of
 * every setting (src/config/env.ts) by parsing them: the schema drops a name it does not have, so a
 * setting renamed in the code and not in the artefacts fails the tests.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEnv } from 'node:util';
import { loadConfig } from '../../src/config/env.ts';

/** The names in `env` that are not settings of the platform. */
export function unknownSettings(env: Record<string, string>): string[] {
  return Object.entries(env)
    .filter(([name, value]) => !Object.hasOwn(loadConfig({ [name]: value }, { readDotEnv: false }), name))
    .map(([name]) => name);
}

/** Parses `env` as the platform would at start-up; throws the platform's own one-line error. */
export const parseSettings = (env: Record<string, string>) => loadConfig(env, { readDotEnv: false });

export const readEnvFile = (path: string) => parseEnv(readFileSync(path, 'utf8')) as Record<string, string>;

/** Every setting of src/config/env.ts: the keys of its one schema object, read from the source. */
export function allSettingNames(): string[] {
  const source = readFileSync(join(import.meta.dirname, '../../src/config/env.ts'), 'utf8');
  const start = source.indexOf('const envSchema = z.object({');
  const schema = source.slice(start, source.indexOf('\n});', start));
  return [...new Set([...schema.matchAll(/^ {2}([A-Z][A-Z0-9_]*):/gm)].map((m) => m[1]!))];
}

/**
 * Settings that are secrets (keys, tokens, passwords, URLs that carry a password): deployment
 * artefacts keep them in a Secret or a secrets file, never beside the plain settings
 * (docs/production.md). A public key is not one.
 */
export const isSecretSetting = (name: string) =>
  /(_KEY|_SECRET|_TOKEN)$|^(DATABASE_URL|DATABASE_REQUEST_URL|REDIS_URL|SMTP_URL|WATCHDOG_WEBHOOK_URL)$/.test(name) &&
  !name.endsWith('_PUBLIC_KEY');
