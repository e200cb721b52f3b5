/**
 * §4.4 session wallet (GET/POST /api/wallet without address, GET /api/wallet/address) and §2
 * Wallet: server-generated key pair, private key sealed with WALLET_ENCRYPTION_KEY and never in
 * a response or a log line.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptSecret } from '../../src/lib/crypto.ts';
import { signUp, startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

const MANY_SIGNUPS = { REGISTER_RATE_LIMIT: '100000' };
const logLines: string[] = [];
const captureLogs = pino(
  { level: 'trace' },
  new Writable({
    write(chunk, _enc, done) {
      logLines.push(String(chunk));
      done();
    },
  }),
);

let t: TestPlatform;
let cdp: TestPlatform;
const responses: string[] = [];

beforeAll(async () => {
  [t, cdp] = await Promise.all([
    startTestPlatform({ ...MANY_SIGNUPS, LOG_LEVEL: 'trace' }, { logger: captureLogs }),
    startTestPlatform({ ...MANY_SIGNUPS, CDP_API_KEY_ID: 'kid', CDP_API_KEY_SECRET: 'ksecret', CDP_PROJECT_ID: 'proj-1' }),
  ]);
});
afterAll(async () => {
  await Promise.all([t?.close(), cdp?.close()]);
});

const post = async (p: TestPlatform, cookie: string | undefined, payload: unknown) => {
  const res = await p.web.inject({
    method: 'POST',
    url: '/api/wallet',
    ...(cookie ? { headers: { cookie } } : {}),
    payload: payload as object,
  });
  responses.push(res.body);
  return res;
};
const get = async (p: TestPlatform, url: string, cookie?: string) => {
  const res = await p.web.inject({ method: 'GET', url, ...(cookie ? { headers: { cookie } } : {}) });
  responses.push(res.body);
  return res;
};
const sealedKeyOf = async (p: TestPlatform, userId: string) =>
  await p.database.db.kysely
    .selectFrom('session_wallets')
    .select(['encrypted_private_key', 'address'])
    .where('user_id', '=', userId)
    .executeTakeFirstOrThrow();

describe('§4.4 POST /api/wallet', () => {
  it('create → {address,network:"base-sepolia",message}; the stored sealed key decrypts to that address\'s key', async () => {
    const u = await signUp(t.web);
    const res = await post(t, u.cookie, { action: 'create' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['address', 'message', 'network']);
    expect(body.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(body.network).toBe('base-sepolia');

    const row = await sealedKeyOf(t, u.id);
    expect(row.address).toBe(body.address);
    const privateKey = decryptSecret(TEST_SECRETS.walletEncryptionKey, row.encrypted_private_key) as `0x${string}`;
    expect(privateKeyToAccount(privateKey).address).toBe(body.address);
  });

  it('create twice → 400; two parallel creates yield one wallet and one 400', async () => {
    const u = await signUp(t.web);
    expect((await post(t, u.cookie, { action: 'create' })).statusCode).toBe(200);
    const again = await post(t, u.cookie, { action: 'create' });
    expect(again.statusCode).toBe(400);
    expect(again.json()).toEqual({ error: 'Wallet already exists' });

    const v = await signUp(t.web);
    const both = await Promise.all([post(t, v.cookie, { action: 'create' }), post(t, v.cookie, { action: 'create' })]);
    expect(both.map((r) => r.statusCode).sort()).toEqual([200, 400]);
    const rows = await t.database.db.kysely.selectFrom('session_wallets').select('address').where('user_id', '=', v.id).execute();
    expect(rows).toHaveLength(1);
  });

  it('get_seed → metadata only {address,network,createdAt,warning}; 404 without a wallet', async () => {
    const u = await signUp(t.web);
    const none = await post(t, u.cookie, { action: 'get_seed' });
    expect(none.statusCode).toBe(404);
    expect(typeof none.json().error).toBe('string');

    const created = (await post(t, u.cookie, { action: 'create' })).json();
    const res = await post(t, u.cookie, { action: 'get_seed' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['address', 'createdAt', 'network', 'warning']);
    expect(body.address).toBe(created.address);
    expect(body.network).toBe('base-sepolia');
    expect(Number.isNaN(Date.parse(body.createdAt))).toBe(false);
  });

  it('export_seed → always 403, with or without a wallet', async () => {
    const u = await signUp(t.web);
    const before = await post(t, u.cookie, { action: 'export_seed' });
    expect(before.statusCode).toBe(403);
    expect(typeof before.json().error).toBe('string');
    await post(t, u.cookie, { action: 'create' });
    const after = await post(t, u.cookie, { action: 'export_seed' });
    expect(after.statusCode).toBe(403);
    expect(Object.keys(after.json())).toEqual(['error']);
  });

  it('invalid or missing action → 400', async () => {
    const u = await signUp(t.web);
    for (const payload of [{ action: 'steal' }, { action: '' }, {}, { action: 1 }, { action: ['create'] }]) {
      const res = await post(t, u.cookie, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(typeof res.json().error).toBe('string');
    }
  });
});

describe('§4.4 GET /api/wallet (without address)', () => {
  it('before a wallet: {address:null,balance:"0",network,hasWallet:false,message}', async () => {
    const u = await signUp(t.web);
    const res = await get(t, '/api/wallet', u.cookie);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ address: null, balance: '0', network: 'base-sepolia', hasWallet: false });
    expect(typeof res.json().message).toBe('string');
  });

  it('after create: {address,balance:"0",network,hasWallet:true,createdAt}', async () => {
    const u = await signUp(t.web);
    const { address } = (await post(t, u.cookie, { action: 'create' })).json();
    const res = await get(t, '/api/wallet', u.cookie);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ address, balance: '0', network: 'base-sepolia', hasWallet: true });
    expect(Object.keys(body).sort()).toEqual(['address', 'balance', 'createdAt', 'hasWallet', 'network']);
  });

  it('with CDP configured: the agenticWallet description, without auth', async () => {
    const res = await get(cdp, '/api/wallet');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      agenticWallet: {
        status: 'configured',
        projectId: 'proj-1',
        features: ['create_wallet', 'get_balance', 'send_usdc', 'trade_tokens', 'x402_payments'],
      },
      instructions: expect.any(String),
    });
  });

  it('with ?address= it is the balance lookup, not the session wallet (500 while TEMPO_RPC_URL is unset)', async () => {
    const u = await signUp(t.web);
    const res = await get(t, '/api/wallet?address=0x0000000000000000000000000000000000000001', u.cookie);
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({
      error: 'Failed to fetch balances: no chain RPC is configured (TEMPO_RPC_URL)',
      code: 'RPC_NOT_CONFIGURED',
    });
  });
});

describe('§4.4 GET /api/wallet/address', () => {
  it('{authenticated:true,address} with a session (address null before create)', async () => {
    const u = await signUp(t.web);
    expect((await get(t, '/api/wallet/address', u.cookie)).json()).toEqual({ authenticated: true, address: null });
    const { address } = (await post(t, u.cookie, { action: 'create' })).json();
    const res = await get(t, '/api/wallet/address', u.cookie);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ authenticated: true, address });
  });

  it("without a session: 200 {authenticated:false,needsAuth:true,message}, §4.4's ordinary answer", async () => {
    const res = await get(t, '/api/wallet/address');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ authenticated: false, needsAuth: true, message: 'Sign in to see your wallet address' });
  });
});

describe('§5 security', () => {
  it('no session → 401 on GET and every POST action', async () => {
    expect((await get(t, '/api/wallet')).statusCode).toBe(401);
    for (const action of ['create', 'get_seed', 'export_seed', 'bogus']) {
      const res = await post(t, undefined, { action });
      expect(res.statusCode, action).toBe(401);
      expect(res.json()).toEqual({ error: 'Unauthorized' });
    }
  });

  it('a signed-out session → 401 where a session is needed (the address says signed out), and no wallet is created', async () => {
    const u = await signUp(t.web);
    await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie: u.cookie } });
    expect((await get(t, '/api/wallet', u.cookie)).statusCode).toBe(401);
    const address = await get(t, '/api/wallet/address', u.cookie);
    expect(address.statusCode).toBe(200);
    expect(address.json()).toMatchObject({ authenticated: false, needsAuth: true });
    expect((await post(t, u.cookie, { action: 'create' })).statusCode).toBe(401);
    const rows = await t.database.db.kysely.selectFrom('session_wallets').select('address').where('user_id', '=', u.id).execute();
    expect(rows).toHaveLength(0);
  });

  it("another user's wallet is never visible", async () => {
    const alice = await signUp(t.web);
    const bob = await signUp(t.web);
    const { address } = (await post(t, alice.cookie, { action: 'create' })).json();
    const bobView = await get(t, '/api/wallet', bob.cookie);
    expect(bobView.json()).toMatchObject({ hasWallet: false, address: null });
    expect((await post(t, bob.cookie, { action: 'get_seed' })).statusCode).toBe(404);
    expect((await get(t, '/api/wallet/address', bob.cookie)).json()).toEqual({ authenticated: true, address: null });
    for (const r of [bobView.body]) expect(r).not.toContain(address);
    // Bob can still create his own wallet
    const mine = await post(t, bob.cookie, { action: 'create' });
    expect(mine.statusCode).toBe(200);
    expect(mine.json().address).not.toBe(address);
  });

  it('row-level security: without user context the wallets table shows no rows', async () => {
    const u = await signUp(t.web);
    await post(t, u.cookie, { action: 'create' });
    const rows = await t.database.db.withoutUser((trx) => trx.selectFrom('session_wallets').selectAll().execute());
    expect(rows).toHaveLength(0);
    const own = await t.database.db.withUser(u.id, (trx) => trx.selectFrom('session_wallets').select('user_id').execute());
    expect(own.map((r) => r.user_id)).toEqual([u.id]);
  });
});

describe('§7 bad input: 4xx JSON {error}, never 5xx', () => {
  it.each([
    ['malformed JSON', 'application/json', '{"action":'],
    ['JSON array', 'application/json', '["create"]'],
    ['JSON null', 'application/json', 'null'],
    ['wrong type', 'application/json', '{"action":{"x":1}}'],
    ['empty body', 'application/json', ''],
    ['wrong content type', 'text/plain', 'action=create'],
    ['form encoded', 'application/x-www-form-urlencoded', 'action=create'],
  ] as const)('%s', async (_name, contentType, payload) => {
    const u = await signUp(t.web);
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/wallet',
      headers: { cookie: u.cookie, 'content-type': contentType },
      payload,
    });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(typeof res.json().error).toBe('string');
  });
});

describe('§2 the private key never leaves the server', () => {
  it('no response body and no log line contains any stored private key (trace-level logs)', async () => {
    const rows = await t.database.db.kysely.selectFrom('session_wallets').select('encrypted_private_key').execute();
    expect(rows.length).toBeGreaterThan(5);
    expect(logLines.length).toBeGreaterThan(0); // the capture works: requests were logged
    for (const { encrypted_private_key } of rows) {
      const pk = decryptSecret(TEST_SECRETS.walletEncryptionKey, encrypted_private_key);
      const bare = pk.slice(2).toLowerCase();
      for (const body of responses) expect(body.toLowerCase()).not.toContain(bare);
      for (const line of logLines) expect(line.toLowerCase()).not.toContain(bare);
    }
  });
});
