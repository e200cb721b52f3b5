/**
 * Names and values the deployment artefacts give the platform, checked against the one schema of
 * every setting (src/config/env.ts) by parsing them: the schema drops a name it does not have, so a
 * setting renamed in the code and not in the artefacts fails the tests.
 */
import { readFileSync } from 'node:fs';
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
