/**
 * §4.8 MPP on the v1 gateway against a local anvil chain (TEMPO_RPC_URL) with an ERC-20 at the
 * configured currency address: the 402 challenge and WWW-Authenticate header, a credential that
 * proves a confirmed transfer and is signed by its sender, single use of nonce, transaction and
 * credential, and a transfer seen on chain that cannot be claimed by anyone else (docs/security.md N7).
 */
import { encodeFunctionData, type Hex, parseAbi, toHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMppMethod, mppProofMessage } from '../../src/domains/payments/mpp/mpp.service.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { ANVIL_ACCOUNT, type Anvil, anvilAvailable, startAnvil } from '../helpers/anvil.ts';
import { balanceSlot, ERC20_RUNTIME } from '../helpers/erc20.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const TOKEN = '0x20c0000000000000000000000000000000000000' as const; // pathUSD, the MPP_CURRENCY default
const RECIPIENT = '0x000000000000000000000000000000000000beef' as const;
const PAYER = ANVIL_ACCOUNT;
// anvil's well-known development keys: account 0 (PAYER) and account 1 (someone watching the chain)
const PAYER_KEY = privateKeyToAccount('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
const ATTACKER_KEY = privateKeyToAccount('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d');
const erc20 = parseAbi([
  'function transfer(address to, uint256 amount) returns (bool)',
  'function balanceOf(address) view returns (uint256)',
]);

let anvil: Anvil | undefined;
let rpcUrl = '';
let chainId = 0;
let t: TestPlatform;
let router: FakeOpenAi;

const rpc = (method: string, params: unknown[]) => anvil!.rpc(method, params);
const send = (from: Hex, data: Hex, to: Hex = TOKEN) => anvil!.send(from, to, data);

const transfer = async (to: Hex, amount: bigint, token: Hex = TOKEN) =>
  (await send(PAYER, encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] }), token)).hash;

const encode = (c: object) => Buffer.from(JSON.stringify(c)).toString('base64url');
/** The credential docs/payments.md describes: the nonce, the transaction, and the sender's signature of both. */
async function credential(nonce: string, hash: string, signer = PAYER_KEY, source: string = signer.address) {
  const signature = await signer.signMessage({ message: mppProofMessage(nonce, hash) });
  return encode({ challenge: { nonce }, payload: { type: 'hash', hash, signature }, source: `did:pkh:eip155:${chainId}:${source}` });
}

beforeAll(async () => {
  if (!anvilAvailable) return;
  anvil = await startAnvil();
  rpcUrl = anvil.rpcUrl;
  chainId = Number(await rpc('eth_chainId', []));
  await rpc('anvil_setCode', [TOKEN, ERC20_RUNTIME]);
  await rpc('anvil_setStorageAt', [TOKEN, balanceSlot(PAYER), toHex(1_000_000_000n, { size: 32 })]);
  router = await startFakeOpenAi({ apiKey: 'router-key', quiet: true });
  t = await startTestPlatform({
    ROUTER_API_KEY: 'router-key',
    ROUTER_BASE_URL: router.url,
    TEMPO_RPC_URL: rpcUrl,
    MPP_RECIPIENT: RECIPIENT,
  });
});

afterAll(async () => {
  await t?.close();
  await router?.close();
  await anvil?.stop();
});

const gw = (headers: Record<string, string>, payload: object = { plugin: 'generate-text', prompt: 'hi' }) =>
  t.web.inject({ method: 'POST', url: '/api/v1/gateway', headers: { 'content-type': 'application/json', ...headers }, payload });

async function challenge(plugin = 'generate-text') {
  const res = await gw({ 'x-payment-method': 'mpp' }, { plugin, prompt: 'hi' });
  expect(res.statusCode).toBe(402);
  return res.json().mpp as { nonce: string; amount: string; expiresAt: number };
}

/** An MPP method of its own over the test chain, on the clock `now`. */
const mppAt = (now: () => number, challengeTtlMs: number) =>
  createMppMethod({
    db: t.database.db.kysely,
    secret: Buffer.alloc(32, 9),
    recipient: RECIPIENT,
    currency: TOKEN,
    rpcUrl,
    challengeTtlMs,
    confirmations: 1,
    now,
  });

describe.skipIf(!anvilAvailable)('§4.8 MPP on anvil', () => {
  it('the test token is an ERC-20 (balanceOf, transfer with a balance check)', async () => {
    const receipt = await send(PAYER, encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [RECIPIENT, 5n] }));
    expect(receipt.status).toBe('0x1');
    expect(receipt.logs).toHaveLength(1);
    const bal = await rpc('eth_call', [
      { to: TOKEN, data: encodeFunctionData({ abi: erc20, functionName: 'balanceOf', args: [RECIPIENT] }) },
      'latest',
    ]);
    expect(BigInt(bal as string)).toBe(5n);
    // the second anvil account holds no tokens: its transfer reverts (or is refused at estimation)
    const tooMuch = await send(
      '0x70997970c51812dc3a010c7d01b50e0d17dc79c8',
      encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYER, 1n] }),
    ).catch(() => ({ status: '0x0' }));
    expect(tooMuch.status).toBe('0x0');
  });

  it('402 challenge body and WWW-Authenticate header as §4.8 says', async () => {
    const res = await gw({});
    expect(res.statusCode).toBe(402);
    const body = res.json();
    expect(body).toMatchObject({
      error: 'payment_required',
      message: expect.any(String),
      mpp: {
        scheme: 'Payment',
        amount: '10000',
        currency: TOKEN,
        recipient: RECIPIENT,
        description: expect.any(String),
        nonce: expect.any(String),
        expiresAt: expect.any(Number),
      },
      stripe: { checkoutUrl: null, amount: 1, currency: 'usd' },
    });
    expect(body.mpp.expiresAt).toBeGreaterThan(Date.now());
    expect(res.headers['www-authenticate']).toMatch(new RegExp(`^Payment amount="10000", currency="${TOKEN}", recipient="${RECIPIENT}"`));
  });

  it('a confirmed transfer pays once: Payment-Receipt is the transaction hash; replays are refused', async () => {
    const c = await challenge();
    const c2 = await challenge();
    const hash = await transfer(RECIPIENT, 10_000n);
    const cred = await credential(c.nonce, hash);
    const ok = await gw({ authorization: `Payment ${cred}` });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.headers['payment-receipt']).toBe(hash);
    expect(ok.json()).toMatchObject({ plugin: 'generate-text', payment: { method: 'mpp', receipt: hash } });
    // the same credential again, and the same transaction under a fresh challenge
    expect((await gw({ authorization: `Payment ${cred}` })).statusCode).toBe(402);
    const again = await gw({ authorization: `Payment ${await credential(c2.nonce, hash)}` });
    expect(again.statusCode).toBe(402);
    expect(again.json().message).toMatch(/already used/);
    // a challenge issued after the transaction cannot take it either
    const c3 = await challenge();
    expect((await gw({ authorization: `Payment ${await credential(c3.nonce, hash)}` })).statusCode).toBe(402);
  });

  it('the same fresh credential sent 10 times in parallel pays exactly once', async () => {
    const c = await challenge();
    const hash = await transfer(RECIPIENT, 10_000n);
    const cred = await credential(c.nonce, hash);
    const results = await Promise.all(Array.from({ length: 10 }, () => gw({ authorization: `Payment ${cred}` })));
    expect(
      results.filter((r) => r.statusCode === 200),
      results.map((r) => r.json().message).join(),
    ).toHaveLength(1);
    expect(results.filter((r) => r.statusCode === 402)).toHaveLength(9);
  });

  it("refuses too small a transfer, another recipient, another token, another plugin's challenge, an unknown tx and garbage", async () => {
    const cases: [() => Promise<string>, RegExp][] = [
      [async () => credential((await challenge()).nonce, await transfer(RECIPIENT, 9_999n)), /below the amount/],
      [
        async () => credential((await challenge()).nonce, await transfer('0x000000000000000000000000000000000000dead', 10_000n)),
        /below the amount/,
      ],
      [async () => credential((await challenge('agent')).nonce, await transfer(RECIPIENT, 50_000n)), /another call/],
      [async () => credential((await challenge()).nonce, `0x${'11'.repeat(32)}`), /not found/],
      [async () => credential('forged.nonce', await transfer(RECIPIENT, 10_000n)), /unknown challenge/],
      [async () => 'not-base64-json', /malformed/],
      // the pre-N7 credential: no payer proof
      [
        async () =>
          encode({ challenge: { nonce: (await challenge()).nonce }, payload: { type: 'hash', hash: await transfer(RECIPIENT, 10_000n) } }),
        /missing payer proof/,
      ],
      [
        async () => {
          const c = await challenge();
          const hash = await transfer(RECIPIENT, 10_000n);
          const signature = await PAYER_KEY.signMessage({ message: mppProofMessage(c.nonce, hash) });
          return encode({ challenge: { nonce: c.nonce }, payload: { type: 'hash', hash, signature }, source: `did:pkh:eip155:1:${PAYER}` });
        },
        /another chain/,
      ],
    ];
    for (const [make, reason] of cases) {
      const res = await gw({ authorization: `Payment ${await make()}` });
      expect(res.statusCode).toBe(402);
      expect(res.json(), res.body).toMatchObject({
        error: 'payment_required',
        message: expect.stringMatching(reason),
        mpp: expect.any(Object),
      });
    }
  });

  it('someone who sees a transfer on chain cannot claim it with their own challenge; its sender still can (docs/security.md N7)', async () => {
    const victims = await challenge();
    const attackers = await challenge();
    const hash = await transfer(RECIPIENT, 10_000n);
    const claims = [
      // the attacker signs for themselves: the transfer is not theirs
      [await credential(attackers.nonce, hash, ATTACKER_KEY), /not from the source/],
      // the attacker names the victim as the source but cannot sign for them
      [await credential(attackers.nonce, hash, ATTACKER_KEY, PAYER), /signature does not match/],
      // a signature the victim made for their own nonce does not carry over to another nonce
      [
        encode({
          challenge: { nonce: attackers.nonce },
          payload: { type: 'hash', hash, signature: await PAYER_KEY.signMessage({ message: mppProofMessage(victims.nonce, hash) }) },
          source: `did:pkh:eip155:${chainId}:${PAYER}`,
        }),
        /signature does not match/,
      ],
    ] as const;
    for (const [cred, reason] of claims) {
      const res = await gw({ authorization: `Payment ${cred}` });
      expect(res.statusCode).toBe(402);
      expect(res.json().message).toMatch(reason);
    }
    const own = await gw({ authorization: `Payment ${await credential(victims.nonce, hash)}` });
    expect(own.statusCode, own.body).toBe(200);
    expect(own.json().payment).toEqual({ method: 'mpp', receipt: hash });
  });

  it("a transfer mined before the challenge is refused; one the chain's clock dates a moment before it counts", async () => {
    let clock = Date.now() + 60_000;
    const mpp = mppAt(() => clock, 300_000);
    // a challenge a minute after the transfer (the server's clock ahead of the chain's by a minute)
    const late = mpp.challenge(10_000, 'generate-text')!;
    const hash = await transfer(RECIPIENT, 10_000n);
    expect(await mpp.verify(await credential(String(late.mpp.nonce), hash), 10_000, 'generate-text')).toEqual({
      ok: false,
      reason: 'transaction predates the challenge',
    });
    // a challenge the chain dates up to a few seconds after the block (whole seconds, its producer's clock) is paid
    clock = Date.now() + 3_000;
    const close = mpp.challenge(10_000, 'generate-text')!;
    const next = await transfer(RECIPIENT, 10_000n);
    expect(await mpp.verify(await credential(String(close.mpp.nonce), next), 10_000, 'generate-text')).toMatchObject({ ok: true });
  });

  it('an expired challenge nonce is refused', async () => {
    let clock = Date.now();
    const mpp = mppAt(() => clock, 1000);
    const c = mpp.challenge(10_000, 'generate-text')!;
    const hash = await transfer(RECIPIENT, 10_000n);
    clock += 1001;
    expect(await mpp.verify(await credential(String(c.mpp.nonce), hash), 10_000, 'generate-text')).toEqual({
      ok: false,
      reason: 'challenge expired',
    });
  });
});
