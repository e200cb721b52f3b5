/**
 * §4.1 POST /api/wallet-auth (SIWE, §5): messages built with viem's createSiweMessage and signed
 * by real keys. The domain must be PUBLIC_URL's host (default localhost:3000), the URI its origin,
 * the chain id SIWE_CHAIN_ID (8453); the nonce comes from /api/auth/nonce, is single use and
 * expires in 10 minutes. §2: wallet users get `<address>@wallet.local` and `Wallet 0xABCD...1234`.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { createSiweMessage } from 'viem/siwe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/config/limits.ts';
import { sha256 } from '../../src/lib/crypto.ts';
import { sessionCookieFrom, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
// A signature that does not recover to the address may still be a smart wallet's, so the verifier
// asks the chain for the address's code: a local JSON-RPC server that knows no contracts answers
// (eth_getCode → 0x). A closed port stands for an unreachable chain (503, issue "SIWE" fixes).
const CLOSED_RPC = 'http://127.0.0.1:9';
let rpc: Server;
let rpcUrl: string;
let rpcStatus = 200;

beforeAll(async () => {
  rpc = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (rpcStatus !== 200) return void res.writeHead(rpcStatus).end('upstream down');
      const calls = JSON.parse(body);
      const answer = (c: { id: number; method: string }) => ({
        jsonrpc: '2.0',
        id: c.id,
        result: c.method === 'eth_chainId' ? '0x2105' : '0x',
      });
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify(Array.isArray(calls) ? calls.map(answer) : answer(calls)));
    });
  });
  await new Promise<void>((r) => rpc.listen(0, '127.0.0.1', r));
  rpcUrl = `http://127.0.0.1:${(rpc.address() as AddressInfo).port}`;
  t = await startTestPlatform({ SIWE_RPC_URL: rpcUrl, REGISTER_RATE_LIMIT: '1000' });
});
afterAll(async () => {
  await t.close();
  rpc.close();
});

const nonce = async () => (await t.web.inject({ method: 'GET', url: '/api/auth/nonce' })).json().nonce as string;

type MsgOverrides = Partial<Parameters<typeof createSiweMessage>[0]>;
async function signedBody(account: PrivateKeyAccount, o: MsgOverrides & { signer?: PrivateKeyAccount } = {}) {
  const { signer, ...overrides } = o;
  const message = createSiweMessage({
    address: account.address,
    chainId: 8453,
    domain: 'localhost:3000',
    uri: 'http://localhost:3000/login',
    version: '1',
    nonce: overrides.nonce ?? (await nonce()),
    statement: 'Sign in to the agent platform',
    issuedAt: new Date(),
    ...overrides,
  });
  const signature = await (signer ?? account).signMessage({ message });
  return { address: account.address, message, signature };
}
const walletAuth = (payload: object) => t.web.inject({ method: 'POST', url: '/api/wallet-auth', payload });

describe('§4.1 POST /api/wallet-auth → 200', () => {
  it('a first sign-in creates the user <address>@wallet.local named "Wallet 0xABCD...1234" and sets the session cookie', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const res = await walletAuth(await signedBody(account));
    expect(res.statusCode).toBe(200);
    const body = res.json();
    const expectedName = `Wallet ${account.address.slice(0, 6)}...${account.address.slice(-4)}`;
    expect(body).toEqual({ ok: true, user: { id: expect.any(String), name: expectedName } });

    const cookie = `service-session=${sessionCookieFrom(res)}`;
    expect(String(res.headers['set-cookie'])).toMatch(/HttpOnly/i);
    const s = await t.web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie } });
    expect(s.json()).toEqual({
      user: { id: body.user.id, name: expectedName, email: `${account.address.toLowerCase()}@wallet.local`, isAdmin: false },
    });
  });

  it('a second sign-in with the same wallet is the same user (no duplicate)', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const first = await walletAuth(await signedBody(account));
    const second = await walletAuth(await signedBody(account));
    expect(first.statusCode).toBe(200);
    expect(second.statusCode).toBe(200);
    expect(second.json().user.id).toBe(first.json().user.id);
    const rows = await t.database.db.kysely
      .selectFrom('users')
      .select('id')
      .where('email', '=', `${account.address.toLowerCase()}@wallet.local`)
      .execute();
    expect(rows).toHaveLength(1);
  });

  it('an address sent in lower case matches the checksummed address of the message', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const body = await signedBody(account);
    const res = await walletAuth({ ...body, address: body.address.toLowerCase() });
    expect(res.statusCode).toBe(200);
  });

  it('an existing user with the wallet-derived email is linked, not duplicated (§4.1 "the wallet links to it")', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const email = `${account.address.toLowerCase()}@wallet.local`;
    // an account that already holds that email (created by another sign-in path, e.g. an
    // identity-provider account; password registration cannot use the wallet domain, see below)
    const reg = await t.database.db.kysely
      .insertInto('users')
      .values({ email, name: 'Old Name', password_hash: null, referral_code: `LINK${Date.now().toString(36).toUpperCase()}` })
      .returning('id')
      .executeTakeFirstOrThrow();
    const regId = reg.id;
    const res = await walletAuth(await signedBody(account));
    expect(res.statusCode).toBe(200);
    expect(res.json().user).toEqual({ id: regId, name: 'Old Name' });
    const rows = await t.database.db.kysely.selectFrom('users').select(['id', 'wallet_address']).where('email', '=', email).execute();
    expect(rows).toEqual([{ id: regId, wallet_address: account.address.toLowerCase() }]);
    // a later sign-in finds the same user through the linked wallet
    expect((await walletAuth(await signedBody(account))).json().user.id).toBe(regId);
  });

  it('password registration of a wallet-derived email is refused (400), so nobody can pre-claim a wallet account', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    for (const email of [`${account.address.toLowerCase()}@wallet.local`, `${account.address}@WALLET.LOCAL`]) {
      const res = await t.web.inject({ method: 'POST', url: '/api/register', payload: { email, password: 'Tr1cky-horse-battery' } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: expect.stringMatching(/email/i) });
    }
    // the wallet's own first sign-in then creates a fresh user
    const res = await walletAuth(await signedBody(account));
    expect(res.statusCode).toBe(200);
    expect(res.json().user.name).toMatch(/^Wallet 0x/);
  });

  it('honours a non-default PUBLIC_URL and SIWE_CHAIN_ID', async () => {
    const t2 = await startTestPlatform({ PUBLIC_URL: 'https://app.example.org', SIWE_CHAIN_ID: '84532', SIWE_RPC_URL: CLOSED_RPC });
    try {
      const account = privateKeyToAccount(generatePrivateKey());
      const n2 = (await t2.web.inject({ method: 'POST', url: '/api/auth/nonce' })).json().nonce;
      const make = async (o: MsgOverrides) => {
        const message = createSiweMessage({
          address: account.address,
          chainId: 84532,
          domain: 'app.example.org',
          uri: 'https://app.example.org',
          version: '1',
          nonce: n2,
          ...o,
        });
        return { address: account.address, message, signature: await account.signMessage({ message }) };
      };
      // the default chain is wrong here
      const wrong = await t2.web.inject({
        method: 'POST',
        url: '/api/wallet-auth',
        payload: await make({ chainId: 8453, nonce: (await t2.web.inject({ method: 'GET', url: '/api/auth/nonce' })).json().nonce }),
      });
      expect(wrong.statusCode).toBe(401);
      const ok = await t2.web.inject({ method: 'POST', url: '/api/wallet-auth', payload: await make({}) });
      expect(ok.statusCode).toBe(200);
      expect(String(ok.headers['set-cookie'])).toMatch(/Secure/);
    } finally {
      await t2.close();
    }
  });
});

describe('§4.1 POST /api/wallet-auth → 401 (invalid signature / message)', () => {
  const account = privateKeyToAccount(generatePrivateKey());
  const expect401 = async (payload: object) => {
    const res = await walletAuth(payload);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: expect.any(String) });
    expect(res.headers['set-cookie']).toBeUndefined();
    return res;
  };

  it('a replayed nonce → 401 (single use)', async () => {
    const body = await signedBody(account);
    expect((await walletAuth(body)).statusCode).toBe(200);
    await expect401(body);
    // and a fresh message reusing the spent nonce → 401
    const n0 = /Nonce: (\w+)/.exec(body.message)![1]!;
    await expect401(await signedBody(account, { nonce: n0 }));
  });

  it('an expired nonce (older than 10 minutes) → 401', async () => {
    // nonces carry their own signed expiry: one issued 10 minutes and 1 second ago (same key)
    await withTestPlatform(
      { SIWE_RPC_URL: CLOSED_RPC },
      { now: () => new Date(Date.now() - LIMITS.siweNonceTtlMs - 1000) },
      async (past) => {
        const n0 = (await past.web.inject({ method: 'GET', url: '/api/auth/nonce' })).json().nonce as string;
        await expect401(await signedBody(account, { nonce: n0 }));
      },
    );
  });

  it('a nonce whose expiry or signature was edited → 401', async () => {
    const n0 = await nonce();
    const later = `${n0.slice(0, 32)}ffffffff${n0.slice(40)}`;
    await expect401(await signedBody(account, { nonce: later }));
    const forged = n0.slice(0, 40) + (n0[40] === '0' ? '1' : '0') + n0.slice(41);
    await expect401(await signedBody(account, { nonce: forged }));
  });

  it('a nonce the server never issued → 401', async () => {
    await expect401(await signedBody(account, { nonce: 'neverissued12345' }));
  });

  it('a wrong domain → 401, and the nonce is not consumed by a message that fails the field checks', async () => {
    const n0 = await nonce();
    await expect401(await signedBody(account, { nonce: n0, domain: 'evil.example.com' }));
    await expect401(await signedBody(account, { nonce: await nonce(), domain: 'localhost:3001' }));
    // the field check failed before the nonce was looked at: it is still usable
    expect((await walletAuth(await signedBody(account, { nonce: n0 }))).statusCode).toBe(200);
  });

  it('a wrong URI → 401', async () => {
    await expect401(await signedBody(account, { uri: 'https://evil.example.com/login' }));
    await expect401(await signedBody(account, { uri: 'https://localhost:3000/login' })); // scheme differs from PUBLIC_URL
  });

  it('a wrong chain id → 401', async () => {
    await expect401(await signedBody(account, { chainId: 1 }));
  });

  it('an address that does not match the message → 401', async () => {
    const other = privateKeyToAccount(generatePrivateKey());
    const body = await signedBody(account);
    await expect401({ ...body, address: other.address });
  });

  it('a signature by another key → 401, and that nonce is spent', async () => {
    const other = privateKeyToAccount(generatePrivateKey());
    const body = await signedBody(account, { signer: other });
    await expect401(body);
    const n0 = /Nonce: (\w+)/.exec(body.message)![1]!;
    await expect401(await signedBody(account, { nonce: n0 }));
  });

  it('EIP-4361 Version other than 1 → 401', async () => {
    const body = await signedBody(account);
    const message = body.message.replace('Version: 1', 'Version: 2');
    await expect401({ ...body, message, signature: await account.signMessage({ message }) });
  });

  it('the chain RPC failing while checking a signature → 503 (not 401 "Invalid signature"), and the nonce is spent', async () => {
    const other = privateKeyToAccount(generatePrivateKey());
    rpcStatus = 502;
    try {
      const body = await signedBody(account, { signer: other });
      const res = await walletAuth(body);
      expect(res.statusCode).toBe(503);
      expect(res.json().error).toMatch(/unreachable/);
    } finally {
      rpcStatus = 200;
    }
    await withTestPlatform({ SIWE_RPC_URL: CLOSED_RPC }, async (closed) => {
      const n = (await closed.web.inject({ method: 'GET', url: '/api/auth/nonce' })).json().nonce as string;
      const body = await signedBody(account, { signer: other, nonce: n });
      const res = await closed.web.inject({ method: 'POST', url: '/api/wallet-auth', payload: body });
      expect(res.statusCode).toBe(503);
    });
  });

  it('a tampered message (signed, then changed) → 401', async () => {
    const body = await signedBody(account);
    await expect401({ ...body, message: body.message.replace('Sign in to the agent platform', 'Sign in to something else') });
  });

  it('a malformed signature (right hex, wrong length) → 401, not 500', async () => {
    const body = await signedBody(account);
    await expect401({ ...body, signature: '0x1234' });
  });

  it('a message past its expiration time → 401', async () => {
    await expect401(await signedBody(account, { expirationTime: new Date(Date.now() - 60_000) }));
  });

  it('a message that is not SIWE → 401', async () => {
    const message = 'hello';
    await expect401({ address: account.address, message, signature: await account.signMessage({ message }) });
  });
});

describe('§4.1 POST /api/wallet-auth → 400 (missing field)', () => {
  it.each(['address', 'message', 'signature'])('missing %s → 400 with a JSON error', async (field) => {
    const account = privateKeyToAccount(generatePrivateKey());
    const body: Record<string, string> = await signedBody(account);
    delete body[field];
    const res = await walletAuth(body);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: expect.any(String) });
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('an empty body object → 400', async () => {
    const res = await walletAuth({});
    expect(res.statusCode).toBe(400);
  });
});

describe('sessions from wallet sign-in are like any other (§2 Session)', () => {
  it('the cookie works and sign-out deletes its row', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const res = await walletAuth(await signedBody(account));
    const token = sessionCookieFrom(res);
    const cookie = `service-session=${token}`;
    expect((await t.web.inject({ method: 'GET', url: '/api/user', headers: { cookie } })).statusCode).toBe(200);
    await t.web.inject({ method: 'POST', url: '/api/auth/signout', headers: { cookie } });
    expect(await t.database.db.kysely.selectFrom('sessions').select('id').where('token_hash', '=', sha256(token)).execute()).toHaveLength(
      0,
    );
    expect((await t.web.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie } })).json()).toEqual({ user: null });
  });
});
