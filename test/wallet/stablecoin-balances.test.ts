/**
 * §4.4 GET /api/wallet?address= on a local anvil chain with the test ERC-20 deployed at the
 * stablecoin addresses of §4.4: every field, funded tokens only, one RPC round trip per lookup
 * (counted at a proxy in front of anvil), 400 for a missing or bad address, 500 on RPC failure.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toHex } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STABLECOINS } from '../../src/domains/wallet/stablecoin-balances.client.ts';
import { type Anvil, anvilAvailable, startAnvil } from '../helpers/anvil.ts';
import { balanceSlot, ERC20_RUNTIME } from '../helpers/erc20.ts';
import { startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const HOLDER = '0x1111111111111111111111111111111111111111' as const;
const EMPTY = '0x2222222222222222222222222222222222222222' as const;

let anvil: Anvil | undefined;
let proxy: Server | undefined;
let rpcRequests = 0;
let t: TestPlatform | undefined;
let testnet: TestPlatform | undefined;

beforeAll(async () => {
  if (!anvilAvailable) return;
  anvil = await startAnvil();
  for (const token of STABLECOINS) await anvil.rpc('anvil_setCode', [token.address, ERC20_RUNTIME]);
  // pathUSD 12.345678, USDC.e 0.5, GUSD 100 (6 decimals); the rest hold nothing
  const fund = async (symbol: string, amount: bigint) =>
    anvil!.rpc('anvil_setStorageAt', [
      STABLECOINS.find((s) => s.symbol === symbol)!.address,
      balanceSlot(HOLDER),
      toHex(amount, { size: 32 }),
    ]);
  await fund('pathUSD', 12_345_678n);
  await fund('USDC.e', 500_000n);
  await fund('GUSD', 100_000_000n);
  // a counting proxy: every HTTP request the platform makes to the RPC
  const target = new URL(anvil.rpcUrl);
  proxy = createServer((req, res) => {
    rpcRequests++;
    const up = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    req.pipe(up);
  });
  await new Promise<void>((r) => proxy!.listen(0, '127.0.0.1', r));
  const proxied = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  t = await startTestPlatform({ TEMPO_RPC_URL: proxied });
  testnet = await startTestPlatform({ TEMPO_RPC_URL: proxied, TEMPO_TESTNET: 'true' });
});

afterAll(async () => {
  await t?.close();
  await testnet?.close();
  proxy?.close();
  await anvil?.stop();
});

const lookup = (app: TestPlatform, address?: string) =>
  app.web.inject({ method: 'GET', url: `/api/wallet${address === undefined ? '' : `?address=${encodeURIComponent(address)}`}` });

describe.skipIf(!anvilAvailable)('§4.4 stablecoin balances (anvil)', () => {
  it('every field; funded tokens only, in the table order; totalUsd with 2 decimals; one RPC round trip', async () => {
    const before = rpcRequests;
    const res = await lookup(t!, HOLDER);
    expect(rpcRequests - before).toBe(1);
    expect(res.statusCode).toBe(200);
    const pathUsd = STABLECOINS[0]!;
    expect(res.json()).toEqual({
      address: '0x1111111111111111111111111111111111111111',
      chain: 'Tempo',
      chainId: 4217,
      testnet: false,
      totalUsd: '112.84',
      primaryToken: { address: pathUsd.address, name: 'pathUSD', symbol: 'pathUSD', decimals: 6, balance: '12.345678' },
      allTokens: [
        { address: pathUsd.address, name: 'pathUSD', symbol: 'pathUSD', balance: '12.345678' },
        { address: '0x20c000000000000000000000b9537d11c60e8b50', name: 'USDC.e', symbol: 'USDC.e', balance: '0.5' },
        { address: '0x20c0000000000000000000005c0bac7cef389a11', name: 'GUSD', symbol: 'GUSD', balance: '100' },
      ],
    });
  });

  it('an empty wallet: totalUsd 0.00, no tokens, pathUSD as primary with balance 0; testnet flag → 42431', async () => {
    const res = await lookup(testnet!, EMPTY);
    expect(res.json()).toMatchObject({ chain: 'Tempo Testnet', chainId: 42431, testnet: true, totalUsd: '0.00', allTokens: [] });
    expect(res.json().primaryToken).toEqual({
      address: STABLECOINS[0]!.address,
      name: 'pathUSD',
      symbol: 'pathUSD',
      decimals: 6,
      balance: '0',
    });
  });

  it('400 without an address or with a bad one (no RPC call); 500 when the RPC fails', async () => {
    const before = rpcRequests;
    for (const bad of [undefined, '', '0x123', 'not-an-address', `${HOLDER}00`]) {
      const res = await lookup(t!, bad);
      if (bad === undefined) continue; // without ?address= this is the session wallet route (401 signed out)
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toEqual(expect.any(String));
    }
    expect(rpcRequests).toBe(before);
    await withTestPlatform({ TEMPO_RPC_URL: 'http://127.0.0.1:9' }, async (down) => {
      const res = await lookup(down, HOLDER);
      expect(res.statusCode).toBe(500);
      expect(res.json().error).toMatch(/balances/);
    });
  });
});
