/**
 * §4.4 custodial wallets through a local CDP API that checks the real authentication
 * (test/fakes/cdp-api.ts): POST /api/wallet/create, GET|POST /api/wallet/cdp, the CDP branch of
 * GET /api/wallet, every error of §4.4 (`setup`, `details`), and private keys at rest only sealed.
 */
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptSecret } from '../../src/lib/crypto.ts';
import { type FakeCdp, startFakeCdp } from '../fakes/cdp-api.ts';
import { signUp, startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

let cdp: FakeCdp;
let edCdp: FakeCdp;
let t: TestPlatform;
let ed: TestPlatform;
let bare: TestPlatform;

beforeAll(async () => {
  cdp = await startFakeCdp();
  edCdp = await startFakeCdp({ apiKeyType: 'ed25519' });
  t = await startTestPlatform({ ...cdp.env, REGISTER_RATE_LIMIT: '1000' });
  ed = await startTestPlatform(edCdp.env);
  bare = await startTestPlatform();
});
afterAll(async () => {
  await Promise.all([t?.close(), ed?.close(), bare?.close()]);
  await Promise.all([cdp?.close(), edCdp?.close()]);
});

const post = (p: TestPlatform, url: string, cookie: string | undefined, payload: object) =>
  p.web.inject({ method: 'POST', url, headers: cookie ? { cookie } : {}, payload });
const rows = (p: TestPlatform) => p.database.db.kysely.selectFrom('cdp_wallets').selectAll().execute();

describe('§4.4 POST /api/wallet/create', () => {
  it('creates an account at the provider (both API key types) and records it for the user', async () => {
    for (const [p, fake] of [
      [t, cdp],
      [ed, edCdp],
    ] as const) {
      const u = await signUp(p.web);
      const res = await post(p, '/api/wallet/create', u.cookie, { email: 'Owner@Example.com' });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toEqual({
        success: true,
        walletAddress: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
        walletId: expect.any(String),
        networks: ['base-sepolia', 'base'],
      });
      expect(fake.accounts.has(body.walletAddress)).toBe(true);
      expect(fake.requests.at(-1)).toMatchObject({ authOk: true, walletAuthOk: true });
      const stored = (await rows(p)).find((r) => r.id === body.walletId)!;
      expect(stored).toMatchObject({ user_id: u.id, address: body.walletAddress, email: 'owner@example.com', encrypted_private_key: null });
    }
  });

  it('400 without email, 401 signed out, 500 with setup when not configured, 500 with details when the provider fails', async () => {
    const u = await signUp(t.web);
    expect((await post(t, '/api/wallet/create', u.cookie, {})).statusCode).toBe(400);
    expect((await post(t, '/api/wallet/create', undefined, { email: 'a@b.co' })).statusCode).toBe(401);
    const v = await signUp(bare.web);
    const off = await post(bare, '/api/wallet/create', v.cookie, { email: 'a@b.co' });
    expect(off.statusCode).toBe(500);
    expect(off.json()).toMatchObject({ error: expect.any(String), setup: expect.stringContaining('CDP_API_KEY_ID') });
    const before = (await rows(t)).length;
    cdp.failWith = 503;
    try {
      const failed = await post(t, '/api/wallet/create', u.cookie, { email: 'a@b.co' });
      expect(failed.statusCode).toBe(500);
      expect(failed.json()).toMatchObject({ error: 'The wallet provider failed', details: expect.stringContaining('told to fail') });
    } finally {
      cdp.failWith = undefined;
    }
    expect((await rows(t)).length).toBe(before);
  });
});

describe('§4.4 GET|POST /api/wallet/cdp', () => {
  it('GET describes the provider; GET /api/wallet shows the agentic wallet when configured', async () => {
    expect((await t.web.inject({ method: 'GET', url: '/api/wallet/cdp' })).json()).toEqual({
      status: 'ok',
      type: 'evm_wallet',
      supportedChains: ['base', 'base-sepolia'],
    });
    const w = (await t.web.inject({ method: 'GET', url: '/api/wallet' })).json();
    expect(w.agenticWallet).toMatchObject({ status: 'configured', projectId: 'fake-project' });
  });

  it('imports a given key (sent encrypted, not stored here); the provider derives the same address', async () => {
    const u = await signUp(t.web);
    const key = generatePrivateKey();
    const res = await post(t, '/api/wallet/cdp', u.cookie, { privateKey: key });
    expect(res.json()).toEqual({ success: true, address: privateKeyToAccount(key).address, network: 'base-sepolia' });
    const stored = (await rows(t)).find((r) => r.address === privateKeyToAccount(key).address)!;
    expect(stored.encrypted_private_key).toBeNull();
    // the same key again: 409, nothing added
    expect((await post(t, '/api/wallet/cdp', u.cookie, { privateKey: key })).statusCode).toBe(409);
  });

  it('without a key the platform generates one and keeps it only sealed', async () => {
    const u = await signUp(t.web);
    const res = await post(t, '/api/wallet/cdp', u.cookie, {});
    expect(res.statusCode).toBe(200);
    const { address } = res.json();
    const stored = (await rows(t)).find((r) => r.address === address)!;
    expect(stored.encrypted_private_key).toMatch(/^v1\./);
    const key = decryptSecret(TEST_SECRETS.walletEncryptionKey, stored.encrypted_private_key!);
    expect(privateKeyToAccount(key as `0x${string}`).address).toBe(address);
    expect(JSON.stringify(stored)).not.toContain(key.slice(2));
  });

  it('400 for a malformed key, 401 signed out; rows are per user (row-level security)', async () => {
    const u = await signUp(t.web);
    for (const privateKey of ['0x1234', 'abc', `0x${'g'.repeat(64)}`])
      expect((await post(t, '/api/wallet/cdp', u.cookie, { privateKey })).statusCode).toBe(400);
    expect((await post(t, '/api/wallet/cdp', undefined, {})).statusCode).toBe(401);
    const other = await signUp(t.web);
    const seen = await t.database.db.withUser(other.id, (trx) => trx.selectFrom('cdp_wallets').select('id').execute());
    expect(seen).toEqual([]);
  });
});
