/**
 * §4.4 `GET /api/wallet?address=`: the 11 stablecoins' `balanceOf` read in ONE RPC round trip on
 * TEMPO_RPC_URL (viem multicall, deployless: the Multicall3 bytecode is sent with the call, so it
 * works on any chain, whether or not Multicall3 is deployed there). All are valued 1:1 to USD.
 * Decimals are the TIP-20 standard's 6; names are the symbols (the specification lists symbols
 * and addresses only). Any RPC failure, or a token call that fails, is the specification's 500.
 */
import type { Address, PublicClient } from 'viem';
import { AppError, badRequest } from '../../lib/errors.ts';
import { viem } from '../../lib/viem.ts';

export const STABLECOINS: readonly { symbol: string; address: Address }[] = [
  { symbol: 'pathUSD', address: '0x20c0000000000000000000000000000000000000' },
  { symbol: 'alphaUSD', address: '0x20c0000000000000000000000000000000000001' },
  { symbol: 'betaUSD', address: '0x20c0000000000000000000000000000000000002' },
  { symbol: 'thetaUSD', address: '0x20c0000000000000000000000000000000000003' },
  { symbol: 'USDC.e', address: '0x20c000000000000000000000b9537d11c60e8b50' },
  { symbol: 'EURC.e', address: '0x20c0000000000000000000001621e21f71cf12fb' },
  { symbol: 'USDT0', address: '0x20c00000000000000000000014f22ca97301eb73' },
  { symbol: 'frxUSD', address: '0x20c0000000000000000000003554d28269e0f3c2' },
  { symbol: 'cUSD', address: '0x20c0000000000000000000000520792dcccccccc' },
  { symbol: 'stcUSD', address: '0x20c0000000000000000000008ee4fcff88888888' },
  { symbol: 'GUSD', address: '0x20c0000000000000000000005c0bac7cef389a11' },
];
export const STABLECOIN_DECIMALS = 6;

export type StablecoinBalances = {
  address: string;
  chain: string;
  chainId: number;
  testnet: boolean;
  totalUsd: string;
  primaryToken: { address: string; name: string; symbol: string; decimals: number; balance: string };
  allTokens: { address: string; name: string; symbol: string; balance: string }[];
};

export function createStablecoinBalanceReader(options: { rpcUrl: string | undefined; testnet: boolean; timeoutMs?: number }) {
  // built on the first read (viem is loaded on first use: src/lib/viem.ts)
  let client: Promise<PublicClient> | undefined;
  const clientFor = (rpcUrl: string) =>
    (client ??= viem().then(({ createPublicClient, http }) =>
      createPublicClient({ transport: http(rpcUrl, { timeout: options.timeoutMs ?? 10_000, retryCount: 0 }) }),
    ));
  const chainId = options.testnet ? 42431 : 4217;
  const chain = options.testnet ? 'Tempo Testnet' : 'Tempo';

  return async function read(rawAddress: string | undefined): Promise<StablecoinBalances> {
    if (!rawAddress) throw badRequest('address is required');
    const { erc20Abi, formatUnits, getAddress, isAddress } = await viem();
    if (!/^0x[0-9a-fA-F]{40}$/.test(rawAddress) || !isAddress(rawAddress, { strict: false })) throw badRequest('Invalid address');
    const address = getAddress(rawAddress);
    if (!options.rpcUrl) throw new AppError('RPC_NOT_CONFIGURED', 'Failed to fetch balances: no chain RPC is configured (TEMPO_RPC_URL)');
    let balances: bigint[];
    try {
      balances = await (await clientFor(options.rpcUrl)).multicall({
        contracts: STABLECOINS.map((t) => ({
          address: t.address,
          abi: erc20Abi,
          functionName: 'balanceOf' as const,
          args: [address] as const,
        })),
        allowFailure: false,
        deployless: true,
      });
    } catch {
      throw new AppError('RPC_FAILED', 'Failed to fetch balances from the chain RPC');
    }
    const funded = STABLECOINS.map((t, i) => ({ ...t, raw: balances[i]! })).filter((t) => t.raw > 0n);
    const total = funded.reduce((s, t) => s + t.raw, 0n);
    // cents, rounded down: a balance is never shown larger than it is
    const cents = total / 10n ** BigInt(STABLECOIN_DECIMALS - 2);
    const totalUsd = `${cents / 100n}.${(cents % 100n).toString().padStart(2, '0')}`;
    const first = funded[0] ?? { ...STABLECOINS[0]!, raw: 0n };
    return {
      address,
      chain,
      chainId,
      testnet: options.testnet,
      totalUsd,
      primaryToken: {
        address: first.address,
        name: first.symbol,
        symbol: first.symbol,
        decimals: STABLECOIN_DECIMALS,
        balance: formatUnits(first.raw, STABLECOIN_DECIMALS),
      },
      allTokens: funded.map((t) => ({
        address: t.address,
        name: t.symbol,
        symbol: t.symbol,
        balance: formatUnits(t.raw, STABLECOIN_DECIMALS),
      })),
    };
  };
}

export type StablecoinBalanceReader = ReturnType<typeof createStablecoinBalanceReader>;
