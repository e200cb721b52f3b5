/**
 * A platform for route tests: real config parsing, a fresh database, real services; external
 * services replaced only where a test passes a fake (or points a *_URL setting at a fake server).
 */
import { pino } from 'pino';
import { type Config, loadConfig } from '../../src/config/env.ts';
import type { Secrets } from '../../src/config/secrets.ts';
import type { App } from '../../src/http/shared/base-app.ts';
import { createMemoryRateLimiter } from '../../src/lib/rate-limiter.ts';
import { createPlatform, type Platform, type PlatformDeps } from '../../src/platform.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';

export const TEST_SECRETS: Secrets = {
  walletEncryptionKey: Buffer.alloc(32, 1),
  secretsEncryptionKey: Buffer.alloc(32, 2),
};

export type TestPlatform = {
  config: Config;
  database: TestDatabase;
  platform: Platform;
  web: App;
  backend: App;
  close(): Promise<void>;
};

export async function startTestPlatform(
  env: Record<string, string> = {},
  overrides: Partial<Omit<PlatformDeps, 'config' | 'db' | 'secrets'>> = {},
): Promise<TestPlatform> {
  const config = loadConfig(
    { DATA_DIR: '/nonexistent-test-data', LOG_LEVEL: 'silent', INTERNAL_API_KEY: 'test-internal-key', ...env },
    { readDotEnv: false },
  );
  const database = await createTestDatabase();
  const platform = createPlatform({
    config,
    db: database.db,
    secrets: TEST_SECRETS,
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    rateLimiter: createMemoryRateLimiter(),
    ...overrides,
  });
  const web = await platform.buildWebApp();
  const backend = await platform.buildBackendApp();
  await Promise.all([web.ready(), backend.ready()]);
  return {
    config,
    database,
    platform,
    web,
    backend,
    async close() {
      await Promise.allSettled([web.close(), backend.close()]);
      await platform.close();
      await database.drop();
    },
  };
}

/** The `service-session` cookie value from a response's Set-Cookie header. */
export function sessionCookieFrom(res: { headers: Record<string, unknown> }): string {
  const raw = res.headers['set-cookie'];
  const all = Array.isArray(raw) ? raw : [raw];
  for (const c of all) {
    const m = typeof c === 'string' ? /service-session=([^;]*)/.exec(c) : null;
    if (m?.[1]) return m[1];
  }
  throw new Error('no service-session cookie in response');
}

let counter = 0;
/** Registers and signs in a user; returns its id and cookie header value. */
export async function signUp(web: App, opts: { email?: string; password?: string; name?: string } = {}) {
  const email = opts.email ?? `user${Date.now().toString(36)}${counter++}@example.com`;
  const password = opts.password ?? 'correct horse battery';
  const reg = await web.inject({ method: 'POST', url: '/api/register', payload: { email, password, name: opts.name } });
  if (reg.statusCode !== 201) throw new Error(`register failed: ${reg.statusCode} ${reg.body}`);
  const login = await web.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password } });
  if (login.statusCode !== 200) throw new Error(`login failed: ${login.statusCode} ${login.body}`);
  const token = sessionCookieFrom(login);
  return { id: reg.json().id as string, email, password, cookie: `service-session=${token}`, token };
}

/**
 * Runs `fn` with a platform of its own and closes it afterwards, whatever happens: for a test
 * that needs settings the file's shared platform does not have.
 */
export async function withTestPlatform<T>(
  env: Record<string, string>,
  ...rest:
    | [fn: (t: TestPlatform) => Promise<T>]
    | [overrides: Partial<Omit<PlatformDeps, 'config' | 'db' | 'secrets'>>, fn: (t: TestPlatform) => Promise<T>]
): Promise<T> {
  const [overrides, fn] = rest.length === 1 ? [{}, rest[0]] : rest;
  const t = await startTestPlatform(env, overrides);
  try {
    return await fn(t);
  } finally {
    await t.close();
  }
}
