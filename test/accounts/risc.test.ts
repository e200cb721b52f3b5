/**
 * Security events from the identity provider (§4.1 "Security event receivers", §6), against a
 * local transmitter that signs RS256 tokens from its own JWKS (test/fakes/risc-issuer.ts).
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.ts';
import { createSecurityEventsService } from '../../src/domains/security-events/risc.service.ts';
import { createRiscVerifier } from '../../src/domains/security-events/risc-verifier.client.ts';
import type { App } from '../../src/http/shared/base-app.ts';
import { createPlatform, type Platform } from '../../src/platform.ts';
import { createSecurityEventsWorker } from '../../src/workers/security-events.ts';
import { EVENT, type FakeRiscIssuer, startFakeRiscIssuer } from '../fakes/risc-issuer.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { signUp, TEST_SECRETS } from '../helpers/platform.ts';

const AUDIENCES = ['web-client.apps.example', 'ios-client.apps.example'];

type Instance = { platform: Platform; web: App; close(): Promise<void> };

let issuer: FakeRiscIssuer;
let database: TestDatabase;
let main: Instance;
/** the main instance's security event worker, paused where only another instance may act */
let mainWorker: ReturnType<typeof createSecurityEventsWorker>;

/** One app instance (a replica) on the shared database; `jobs` runs its security event worker. */
async function startInstance(extraEnv: Record<string, string> = {}, jobs = true): Promise<Instance> {
  const config = loadConfig(
    {
      DATA_DIR: '/nonexistent-test-data',
      LOG_LEVEL: 'silent',
      INTERNAL_API_KEY: 'test-internal-key',
      REGISTER_RATE_LIMIT: '1000',
      IDP_ISSUER: issuer.issuer,
      IDP_CLIENT_ID: AUDIENCES.join(','),
      IDP_RISC_CONFIG_URL: issuer.configUrl,
      ...extraEnv,
    },
    { readDotEnv: false },
  );
  const platform = createPlatform({
    config,
    db: database.db,
    secrets: TEST_SECRETS,
    logger: pino({ level: 'silent' }),
    securityEvents: { refetchCooldownMs: 0, pollMs: 50 },
  });
  const web = await platform.buildWebApp();
  await web.ready();
  if (jobs) platform.startWebJobs();
  return {
    platform,
    web,
    async close() {
      await web.close();
      await platform.close();
    },
  };
}

const post = (web: App, token: string, url = '/api/security/risc') =>
  web.inject({ method: 'POST', url, payload: token, headers: { 'content-type': 'application/secevent+jwt' } });

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 5000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const countEvents = async () =>
  (
    await database.db.kysely
      .selectFrom('risc_events')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow()
  ).n;
const jtiOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).jti as string;
const eventRow = (jti: string) => database.db.kysely.selectFrom('risc_events').selectAll().where('jti', '=', jti).executeTakeFirst();
const processed = (jti: string) => until(`event ${jti} done`, async () => (await eventRow(jti))?.state === 'done' && eventRow(jti));
const signedIn = async (web: App, cookie: string) =>
  (await web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie } })).json().user !== null;
const userRow = (id: string) => database.db.kysely.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

async function linkIdp(userId: string, subject: string) {
  await database.db.kysely
    .insertInto('linked_accounts')
    .values({ user_id: userId, provider: 'idp', subject, email: null, refresh_token_enc: 'enc:refresh' })
    .execute();
}

/** A signed event for one subject; returns the jti. */
async function send(events: Record<string, unknown>, web = main.web): Promise<string> {
  const jti = crypto.randomUUID();
  const res = await post(web, await issuer.sign({ jti, events }));
  expect(res.statusCode).toBe(202);
  return jti;
}

beforeAll(async () => {
  issuer = await startFakeRiscIssuer({ audiences: AUDIENCES });
  database = await createTestDatabase();
  main = await startInstance({}, false);
  mainWorker = createSecurityEventsWorker({ events: main.platform.services.securityEvents, pollMs: 20 });
  await mainWorker.start();
});
afterAll(async () => {
  await mainWorker?.stop();
  await main?.close();
  await database?.drop();
  await issuer?.close();
});

describe('POST /api/security/risc refuses every invalid token with 400 (§6 validation order)', () => {
  const bad: [string, () => Promise<string>, RegExp][] = [
    ['an empty body', async () => '', /Empty body/],
    ['not a JWT', async () => 'not-a-token', /Invalid token/],
    ['a wrong issuer', () => issuer.sign({ iss: 'https://evil.example' }), /issuer/],
    ['a wrong audience', () => issuer.sign({ aud: 'someone-else.apps.example' }), /audience/],
    ['no audience', () => issuer.sign({ aud: null }), /audience/],
    ['an expired token', () => issuer.sign({ exp: Math.floor(Date.now() / 1000) - 600 }), /expired/],
    ['a forged signature', () => issuer.sign({ forged: true }), /signature/],
    ['an unknown kid (even after a refetch)', () => issuer.sign({ kid: 'kid-nobody-published' }), /Unknown token signing key/],
    ['alg none', () => issuer.sign({ alg: 'none' }), /only RS256/],
    ['HS256 (the public key as HMAC secret)', () => issuer.sign({ alg: 'HS256' }), /only RS256/],
    ['no jti', () => issuer.sign({ jti: null }), /jti/],
    ['no events', () => issuer.sign({ events: {} }), /events/],
  ];
  it.each(bad)('%s → 400 {error}, nothing recorded', async (_name, make, message) => {
    const before = await countEvents();
    const res = await post(main.web, await make());
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(message);
    const after = await countEvents();
    expect(after).toBe(before);
  });

  it('an unknown kid makes the receiver fetch the key set again before refusing', async () => {
    const before = issuer.fetches.jwks;
    expect((await post(main.web, await issuer.sign({ kid: 'another-made-up-kid' }))).statusCode).toBe(400);
    expect(issuer.fetches.jwks).toBe(before + 1);
  });
});

describe('a valid event', () => {
  it('GET describes the receiver (§4.1)', async () => {
    const res = await main.web.inject({ method: 'GET', url: '/api/security/risc' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      status: 'ok',
      endpoint: '/api/security/risc',
      events_supported: [
        'account-disabled',
        'account-enabled',
        'sessions-revoked',
        'tokens-revoked',
        'account-credential-change-required',
        'verification',
      ],
    });
    expect(typeof res.json().description).toBe('string');
  });

  it('is answered 202 with an empty body, recorded, and acknowledged (verification); any configured client id is an audience', async () => {
    const jti = crypto.randomUUID();
    const res = await post(main.web, await issuer.sign({ jti, aud: AUDIENCES[1], events: { [EVENT.verification]: { state: 's-1' } } }));
    expect(res.statusCode).toBe(202);
    expect(res.body).toBe('');
    const row = await processed(jti);
    expect(row.outcome).toEqual([{ event: 'verification', userIds: [], action: 'acknowledged' }]);
  });

  it('a repeated jti is acknowledged (202) and not acted on again', async () => {
    const u = await signUp(main.web);
    const token = await issuer.sign({ events: { [EVENT.sessionsRevoked]: { subject: { email: u.email } } } });
    const jti = jtiOf(token);
    expect((await post(main.web, token)).statusCode).toBe(202);
    await processed(jti);
    expect(await signedIn(main.web, u.cookie)).toBe(false);
    // signed in again after the event: the same token delivered again ends nothing
    const again = await main.web.inject({ method: 'POST', url: '/api/auth/login', payload: { email: u.email, password: u.password } });
    const cookie = `service-session=${/service-session=([^;]*)/.exec(String(again.headers['set-cookie']))![1]}`;
    const res = await post(main.web, token);
    expect(res.statusCode).toBe(202);
    expect(res.body).toBe('');
    await new Promise((r) => setTimeout(r, 300)); // several worker polls
    expect(await signedIn(main.web, cookie)).toBe(true);
    expect((await eventRow(jti))!.attempts).toBe(1);
  });
});

describe('§6 event table: each event type acts on the users named by sub or email', () => {
  it('sessions-revoked by sub (the linked idp account): every session ends, refused on the next request', async () => {
    const u = await signUp(main.web);
    const other = await signUp(main.web);
    await linkIdp(u.id, 'sub-sessions-1');
    expect(await signedIn(main.web, u.cookie)).toBe(true); // now in the session cache
    const jti = await send({
      [EVENT.sessionsRevoked]: { subject: { subject_type: 'iss-sub', iss: issuer.issuer, sub: 'sub-sessions-1' } },
    });
    expect((await processed(jti)).outcome).toEqual([{ event: 'sessions-revoked', userIds: [u.id], action: 'sessions revoked' }]);
    expect(await signedIn(main.web, u.cookie)).toBe(false);
    expect(await signedIn(main.web, other.cookie)).toBe(true);
  });

  it('account-disabled with reason hijacking: idp sign-in disabled and sessions revoked; account-enabled re-enables', async () => {
    const u = await signUp(main.web);
    const jti = await send({ [EVENT.accountDisabled]: { subject: { email: u.email.toUpperCase() }, reason: 'hijacking' } });
    await processed(jti);
    expect((await userRow(u.id)).idp_signin_disabled_at).toBeInstanceOf(Date);
    expect(await signedIn(main.web, u.cookie)).toBe(false);
    await processed(await send({ [EVENT.accountEnabled]: { subject: { email: u.email } } }));
    expect((await userRow(u.id)).idp_signin_disabled_at).toBeNull();
  });

  it('account-disabled with another reason: sessions revoked, idp sign-in still allowed', async () => {
    const u = await signUp(main.web);
    await processed(await send({ [EVENT.accountDisabled]: { subject: { email: u.email }, reason: 'bulk-account' } }));
    expect(await signedIn(main.web, u.cookie)).toBe(false);
    expect((await userRow(u.id)).idp_signin_disabled_at).toBeNull();
  });

  it('tokens-revoked: the stored idp refresh token is dropped (the code host one kept) and sessions revoked', async () => {
    const u = await signUp(main.web);
    await linkIdp(u.id, 'sub-tokens-1');
    await database.db.kysely
      .insertInto('linked_accounts')
      .values({ user_id: u.id, provider: 'codehost', subject: 'gh-1', refresh_token_enc: 'enc:codehost' })
      .execute();
    await processed(await send({ [EVENT.tokensRevoked]: { subject: { sub: 'sub-tokens-1' } } }));
    const links = await database.db.kysely
      .selectFrom('linked_accounts')
      .selectAll()
      .where('user_id', '=', u.id)
      .orderBy('provider')
      .execute();
    expect(links.map((l) => [l.provider, l.refresh_token_enc])).toEqual([
      ['codehost', 'enc:codehost'],
      ['idp', null],
    ]);
    expect(await signedIn(main.web, u.cookie)).toBe(false);
  });

  it('account-credential-change-required is logged only: sessions stay', async () => {
    const u = await signUp(main.web);
    const row = await processed(await send({ [EVENT.credentialChangeRequired]: { subject: { email: u.email } } }));
    expect(row.outcome).toEqual([{ event: 'account-credential-change-required', userIds: [u.id], action: 'logged' }]);
    expect(await signedIn(main.web, u.cookie)).toBe(true);
  });

  it('an unknown subject matches nobody; the event is still done', async () => {
    const row = await processed(await send({ [EVENT.sessionsRevoked]: { subject: { sub: 'nobody', email: 'nobody@example.com' } } }));
    expect(row.outcome).toEqual([{ event: 'sessions-revoked', userIds: [], action: 'sessions revoked' }]);
  });
});

describe('the work after the 202 is durable', () => {
  it('an event recorded by an instance that stops before acting is acted on by a new instance', async () => {
    const u = await signUp(main.web);
    // the main instance's worker is paused for this test: only the restarted instance may act
    await mainWorker.stop();
    const first = await startInstance({}, false);
    const jti = await send({ [EVENT.sessionsRevoked]: { subject: { email: u.email } } }, first.web);
    await first.close(); // the process is gone before anything acted on the event
    expect((await eventRow(jti))!.state).toBe('pending');
    expect(await signedIn(main.web, u.cookie)).toBe(true);
    const second = await startInstance();
    try {
      await processed(jti);
      expect(await signedIn(second.web, u.cookie)).toBe(false);
    } finally {
      await second.close();
      await mainWorker.start();
    }
  });

  it('a failed attempt is retried, and two workers never act on one event twice (SKIP LOCKED)', async () => {
    const u = await signUp(main.web);
    const calls: string[] = [];
    let failOnce = true;
    const events = createSecurityEventsService({
      db: database.db,
      verifier: createRiscVerifier({ issuer: issuer.issuer, audiences: AUDIENCES, configUrl: issuer.configUrl }),
      accounts: {
        async revokeAllSessions(userId) {
          calls.push(userId);
          if (failOnce) {
            failOnce = false;
            throw new Error('database went away');
          }
          await main.platform.services.accounts.revokeAllSessions(userId);
        },
      },
    });
    // two workers of their own over that service, as two replicas run them
    // a second between tries: "not due yet" is checked at once, which a loaded machine must not outrun
    const [one, two] = [1, 2].map(() => createSecurityEventsWorker({ events, retryBaseMs: 1_000 }));
    await mainWorker.stop(); // it would take the event first
    try {
      const token = await issuer.sign({ events: { [EVENT.sessionsRevoked]: { subject: { email: u.email } } } });
      await events.receive(token);
      const jti = jtiOf(token);
      expect(await one!.runOnce()).toBe(1);
      const failed = (await eventRow(jti))!;
      expect([failed.state, failed.attempts, failed.last_error]).toEqual(['pending', 1, 'database went away']);
      expect(await one!.runOnce()).toBe(0); // not due yet
      await new Promise((r) => setTimeout(r, 1_050));
      const both = await Promise.all([one!.runOnce(), two!.runOnce()]);
      expect(both.filter(Boolean)).toHaveLength(1);
      expect((await eventRow(jti))!.state).toBe('done');
      expect(calls).toEqual([u.id, u.id]);
      expect(await signedIn(main.web, u.cookie)).toBe(false);
    } finally {
      await mainWorker.start();
    }
  });
});

describe('signing keys: fetched once, kept, fetched again for a new kid', () => {
  it('an unreachable provider is 503 (the transmitter delivers again later), not a verdict on the token', async () => {
    const verifier = createRiscVerifier({
      issuer: issuer.issuer,
      audiences: AUDIENCES,
      configUrl: 'http://127.0.0.1:9/risc-configuration',
    });
    await expect(verifier.verify(await issuer.sign())).rejects.toMatchObject({
      status: 503,
      message: 'Security event signing keys unavailable',
    });
  });

  it('many events share one fetch of the configuration and JWKS; a rotated key is fetched on its first token', async () => {
    const fresh = await startInstance();
    try {
      const before = { ...issuer.fetches };
      for (let i = 0; i < 5; i++) await send({ [EVENT.verification]: { state: `n${i}` } }, fresh.web);
      expect(issuer.fetches.config - before.config).toBe(1);
      expect(issuer.fetches.jwks - before.jwks).toBe(1);
      await issuer.rotate();
      await send({ [EVENT.verification]: { state: 'rotated' } }, fresh.web);
      expect(issuer.fetches.jwks - before.jwks).toBe(2);
      expect(issuer.fetches.config - before.config).toBe(1);
      await send({ [EVENT.verification]: { state: 'rotated again' } }, fresh.web);
      expect(issuer.fetches.jwks - before.jwks).toBe(2);
    } finally {
      await fresh.close();
    }
  });
});

describe.skipIf(!process.env.REDIS_URL)('a revoked session is refused at once by every app instance (REDIS_URL)', () => {
  it('instance B had the session cached; the event acted on by A evicts it there too', async () => {
    const a = await startInstance({ REDIS_URL: process.env.REDIS_URL! });
    const b = await startInstance({ REDIS_URL: process.env.REDIS_URL! }, false);
    try {
      await new Promise((r) => setTimeout(r, 200)); // both subscribed
      const u = await signUp(a.web);
      expect(await signedIn(b.web, u.cookie)).toBe(true); // cached in B for 5 s
      await mainWorker.stop(); // only A acts
      const jti = await send({ [EVENT.sessionsRevoked]: { subject: { email: u.email } } }, a.web);
      await processed(jti);
      // well inside B's 5 s cache lifetime: only the eviction over Redis can end it there
      await until('B refuses the session', async () => !(await signedIn(b.web, u.cookie)), 1000);
    } finally {
      await Promise.all([a.close(), b.close()]);
      await mainWorker.start();
    }
  });
});
