/**
 * Logs never contain secrets (docs/architecture.md rule 6: "never logged"): with the production
 * logger options at level info (and at trace), a register, a login, authenticated requests, a
 * wallet sign-in and a sign-out leave no password, session token, cookie value, bearer key or
 * secret query value in the captured log text. Every line carries the request id.
 */
import { Writable } from 'node:stream';
import { type LoggerOptions, pino } from 'pino';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createSiweMessage } from 'viem/siwe';
import { describe, expect, it } from 'vitest';
import { createBaseApp } from '../../src/http/shared/base-app.ts';
import { loggerOptions, redactSecrets } from '../../src/http/shared/logging.ts';
import { sessionCookieFrom, startTestPlatform } from '../helpers/platform.ts';

function memoryLogger(level: string) {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  const logger = pino({ ...(loggerOptions(level) as LoggerOptions), level }, stream);
  return { logger, text: () => chunks.join('') };
}

describe.each(['info', 'trace'])('logs at level %s contain no secrets', (level) => {
  it('register + login + authenticated requests + wallet-auth + sign-out', async () => {
    const { logger, text } = memoryLogger(level);
    const t = await startTestPlatform({ LOG_LEVEL: level, REGISTER_RATE_LIMIT: '100' }, { logger });
    const secrets: string[] = [];
    try {
      const email = `logs-${level}@example.com`;
      const password = `pw-${level}-Zq8!vX3#kLm2`;
      const wrongPassword = `wrong-${level}-Yt7@pQ1`;
      secrets.push(password, wrongPassword);

      expect(
        (await t.web.inject({ method: 'POST', url: '/api/register', payload: { email, password, turnstileToken: 'tt-secret-token-123' } }))
          .statusCode,
      ).toBe(201);
      secrets.push('tt-secret-token-123');
      expect((await t.web.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password: wrongPassword } })).statusCode).toBe(
        401,
      );
      const login = await t.web.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password } });
      expect(login.statusCode).toBe(200);
      const token = sessionCookieFrom(login);
      secrets.push(token, encodeURIComponent(token));
      const cookie = `service-session=${token}; other=cookie-secret-value`;
      secrets.push('cookie-secret-value');

      expect((await t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie } })).statusCode).toBe(200);
      expect((await t.web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie } })).json().user.email).toBe(email);
      expect((await t.web.inject({ method: 'PATCH', url: '/api/user', headers: { cookie }, payload: { name: 'Logged' } })).statusCode).toBe(
        200,
      );
      // a secret in a query string is redacted from the logged URL
      await t.web.inject({ method: 'GET', url: '/api/auth/session?token=query-secret-abc&code=oauth-code-xyz', headers: { cookie } });
      secrets.push('query-secret-abc', 'oauth-code-xyz');
      // a bearer key sent to the backend
      await t.backend.inject({ method: 'GET', url: '/health', headers: { authorization: 'Bearer backend-key-secret-987' } });
      secrets.push('backend-key-secret-987');

      const account = privateKeyToAccount(generatePrivateKey());
      const nonce = (await t.web.inject({ method: 'GET', url: '/api/auth/nonce' })).json().nonce;
      const message = createSiweMessage({
        address: account.address,
        chainId: 8453,
        domain: 'localhost:3000',
        uri: 'http://localhost:3000',
        version: '1',
        nonce,
      });
      const signature = await account.signMessage({ message });
      const wallet = await t.web.inject({
        method: 'POST',
        url: '/api/wallet-auth',
        payload: { address: account.address, message, signature },
      });
      expect(wallet.statusCode).toBe(200);
      const walletToken = sessionCookieFrom(wallet);
      secrets.push(walletToken, signature);

      expect(
        (await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: `service-session=${walletToken}` } }))
          .statusCode,
      ).toBe(200);
    } finally {
      await t.close();
    }

    const log = text();
    const lines = log
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    // the logger really captured the traffic (the test can fail): request lines exist
    expect(lines.filter((l) => l.msg === 'request completed').length).toBeGreaterThanOrEqual(10);
    for (const l of lines.filter((x) => x.req || x.res)) expect(typeof l.reqId).toBe('string');
    // the query-string secrets were replaced, not dropped silently
    expect(log).toMatch(/token=REDACTED/);
    for (const s of secrets) expect(log.includes(s), `log contains a secret: ${s.slice(0, 8)}…`).toBe(false);
  });
});

/**
 * Above info (what a busy deployment runs) the request logger must still do its job: disabled
 * levels write nothing, enabled ones write with the request id, children and redaction
 * (src/http/shared/logging.ts redactSecrets) work, and Fastify's own error lines carry the id.
 */
describe('request logger above info (LOG_LEVEL=warn)', () => {
  it('writes warnings and errors with reqId and redaction, and nothing below warn', async () => {
    const { logger, text } = memoryLogger('warn');
    const app = await createBaseApp({
      title: 't',
      description: 't',
      version: '0',
      logLevel: 'warn',
      bodyLimit: 1000,
      trustProxy: false,
      logger,
    });
    app.get('/quiet', async (request) => {
      request.log.info('info-line-never-written');
      request.log.debug('debug-line-never-written');
      const log = request.log as typeof request.log & { isLevelEnabled(level: string): boolean };
      return { ok: log.isLevelEnabled('warn') && !log.isLevelEnabled('info'), level: log.level };
    });
    app.get('/warn', async (request) => {
      request.log.warn({ user: { password: 'pw-logged-by-mistake' } }, 'warn-line');
      request.log.child({ part: 'inner' }).error('child-error-line');
      return { ok: true };
    });
    app.get('/boom', async () => {
      throw new Error('boom-failure');
    });
    try {
      const quiet = await app.inject({ method: 'GET', url: '/quiet', headers: { 'x-request-id': 'rid-quiet' } });
      expect(quiet.json()).toEqual({ ok: true, level: 'warn' });
      await app.inject({ method: 'GET', url: '/warn', headers: { 'x-request-id': 'rid-warn' } });
      const boom = await app.inject({ method: 'GET', url: '/boom', headers: { 'x-request-id': 'rid-boom' } });
      expect(boom.statusCode).toBe(500);
    } finally {
      await app.close();
    }
    const lines = text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.some((l) => l.reqId === 'rid-quiet')).toBe(false);
    expect(text()).not.toContain('never-written');
    const warn = lines.find((l) => l.msg === 'warn-line');
    expect(warn).toMatchObject({ reqId: 'rid-warn', level: 40, user: { password: '[redacted]' } });
    expect(lines.find((l) => l.msg === 'child-error-line')).toMatchObject({ reqId: 'rid-warn', part: 'inner', level: 50 });
    expect(lines.some((l) => l.reqId === 'rid-boom' && l.level === 50 && JSON.stringify(l).includes('boom-failure'))).toBe(true);
    expect(text()).not.toContain('pw-logged-by-mistake');
  });
});

describe('redaction (src/http/shared/logging.ts redactSecrets, pino formatters.log and formatters.bindings)', () => {
  it('censors secret fields at the top and one level down', () => {
    const { logger, text } = memoryLogger('info');
    logger.info({ password: 'top-pw', body: { email: 'a@example.com', token: 'inner-token' }, n: 1 }, 'line');
    logger.child({ reqId: 'r1' }).info({ apiKey: 'k-secret', wallet: { privateKey: 'pk-secret', signature: 'sig-secret' } }, 'child line');
    const [line, child] = text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(line).toMatchObject({ password: '[redacted]', body: { email: 'a@example.com', token: '[redacted]' }, n: 1, msg: 'line' });
    expect(child).toMatchObject({ reqId: 'r1', apiKey: '[redacted]', wallet: { privateKey: '[redacted]', signature: '[redacted]' } });
    for (const secret of ['top-pw', 'inner-token', 'k-secret', 'pk-secret', 'sig-secret']) expect(text()).not.toContain(secret);
  });

  it('never changes what it was given, and passes a line without secrets through as is', () => {
    const body = { email: 'a@example.com', password: 'pw' };
    const input = { body, other: { x: 1 } };
    const out = redactSecrets(input);
    expect(input.body.password).toBe('pw');
    expect(input.body).toBe(body);
    expect(out.body).toEqual({ email: 'a@example.com', password: '[redacted]' });
    expect(out.other).toBe(input.other);
    const clean = { req: { method: 'GET' }, n: 2 };
    expect(redactSecrets(clean)).toBe(clean);
  });

  it('keeps an Error an Error (class, message, stack) when it carries a secret', () => {
    const err = Object.assign(new TypeError('upstream refused'), { token: 'err-token' });
    const out = redactSecrets({ err }).err as TypeError & { token: string };
    expect(out).toBeInstanceOf(TypeError);
    expect(out.message).toBe('upstream refused');
    expect(out.stack).toBe(err.stack);
    expect(out.token).toBe('[redacted]');
    expect(err.token).toBe('err-token');
    const { logger, text } = memoryLogger('info');
    logger.error({ err }, 'failed');
    expect(text()).toContain('upstream refused');
    expect(text()).not.toContain('err-token');
  });
});
