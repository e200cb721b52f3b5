/**
 * Underground agent wallets (§4.15): one key pair per agent, generated here (viem
 * generatePrivateKey), the private key sealed with WALLET_ENCRYPTION_KEY and never returned. The
 * bus (POST /api/underground/bus/send) verifies an agent's message signatures against its address.
 * Addresses are stored and returned lower-case, like every wallet key of the platform.
 * The balance is the address's USDC on Base, read with viem from BASE_RPC_URL.
 */
import type { Address, PublicClient } from 'viem';
import type { Db } from '../../db/client.ts';
import { encryptSecret } from '../../lib/crypto.ts';
import { AppError, badRequest, forbidden, notFound } from '../../lib/errors.ts';
import { viem, viemAccounts } from '../../lib/viem.ts';
import { undergroundRepo as repo } from './underground.repo.ts';
import { assertOwnsAgent } from './underground.service.ts';

/** Circle's USDC on Base mainnet (6 decimals). */
export const BASE_USDC_ADDRESS: Address = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
export const USDC_DECIMALS = 6;

export function createUndergroundWallets(deps: {
  db: Db;
  walletKey: Buffer;
  rpcUrl: string;
  /** the token whose balance is read; Base USDC unless a test deploys its own */
  usdcAddress?: Address;
  timeoutMs?: number;
}) {
  const { db } = deps;
  let client: Promise<PublicClient> | undefined;
  const publicClient = () =>
    (client ??= viem().then(({ createPublicClient, http }) =>
      createPublicClient({ transport: http(deps.rpcUrl, { timeout: deps.timeoutMs ?? 10_000, retryCount: 0 }) }),
    ));

  return {
    /** The agent's wallet, created on the first call; `created` says whether this call made it. */
    async create(userId: string, agentId: string) {
      await assertOwnsAgent(db, userId, agentId);
      const { generatePrivateKey, privateKeyToAccount } = await viemAccounts();
      const privateKey = generatePrivateKey();
      const address = privateKeyToAccount(privateKey).address.toLowerCase();
      const row = await db.withUser(userId, (trx) =>
        repo.insertWalletOnce(trx, { agentId, userId, address, privateKeyEnc: encryptSecret(deps.walletKey, privateKey) }),
      );
      return { created: row.created, wallet: { address: row.address, agentId: row.agent_id } };
    },

    /** USDC balance of one of the caller's agent wallets: 404 unknown address, 403 another user's. */
    async balance(userId: string, rawAddress: string) {
      if (!/^0x[0-9a-fA-F]{40}$/.test(rawAddress)) throw badRequest('Invalid address: expected 0x followed by 40 hex digits');
      const address = rawAddress.toLowerCase();
      const owner = await repo.walletOwner(db.kysely, address);
      if (owner === undefined) throw notFound('Wallet not found');
      if (owner !== userId) throw forbidden('You do not own this wallet');
      const { erc20Abi, formatUnits } = await viem();
      let raw: bigint;
      try {
        raw = await (await publicClient()).readContract({
          address: deps.usdcAddress ?? BASE_USDC_ADDRESS,
          abi: erc20Abi,
          functionName: 'balanceOf',
          args: [address as Address],
        });
      } catch {
        throw new AppError('RPC_FAILED', 'Failed to read the USDC balance from the chain RPC');
      }
      return { address, balance_usdc: Number(formatUnits(raw, USDC_DECIMALS)) };
    },
  };
}

export type UndergroundWallets = ReturnType<typeof createUndergroundWallets>;
