/**
 * §4.4 custodial wallets (docs/payments.md "Custodial wallets"): accounts at the CDP provider,
 * recorded per user under row-level security.
 * - `create(user, email)`: POST /api/wallet/create, a new provider account named after the user.
 * - `createOrImport(user, privateKey?)`: POST /api/wallet/cdp, imports the given key, or a key the
 *   platform generates (then kept sealed with WALLET_ENCRYPTION_KEY, never in clear).
 * Not configured (no CDP_API_KEY_ID/SECRET): 500 with `setup`; provider failures: 500 with `details`.
 */
import type { Db } from '../../db/client.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { encryptSecret } from '../../lib/crypto.ts';
import { AppError, badRequest, conflict } from '../../lib/errors.ts';
import { viemAccounts } from '../../lib/viem.ts';
import { CdpError, type CustodialWalletProvider } from './cdp.client.ts';
import { cdpWalletsRepo } from './cdp-wallets.repo.ts';

export const CDP_SETUP =
  'Set CDP_API_KEY_ID, CDP_API_KEY_SECRET and CDP_WALLET_SECRET (Coinbase Developer Platform) to enable custodial wallets';
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function createCdpWalletsService(deps: { db: Db; provider: CustodialWalletProvider | undefined; walletKey: Buffer }) {
  function provider(): CustodialWalletProvider {
    if (!deps.provider) throw new AppError('CDP_NOT_CONFIGURED', 'Custodial wallets are not configured', { setup: CDP_SETUP });
    return deps.provider;
  }
  const failed = (err: unknown): never => {
    if (err instanceof AppError) throw err;
    throw new AppError('CDP_FAILED', 'The wallet provider failed', {
      details: err instanceof CdpError || err instanceof Error ? err.message : String(err),
    });
  };
  /** provider account names: letters, digits and hyphens, 2-36 characters */
  const accountName = (userId: string) => `u-${userId.replace(/-/g, '').slice(0, 20)}-${Date.now().toString(36)}`;

  return {
    /** §4.4 POST /api/wallet/create */
    async create(userId: string, email: string | undefined) {
      const e = email?.trim();
      if (!e) throw badRequest('Email is required');
      if (e.length > 320 || !EMAIL.test(e)) throw badRequest('Invalid email');
      const account = await provider().createAccount(accountName(userId)).catch(failed);
      const row = await deps.db.withUser(userId, (trx) =>
        cdpWalletsRepo.insert(trx, {
          userId,
          address: account.address,
          providerName: account.name,
          email: e.toLowerCase(),
          encryptedPrivateKey: null,
        }),
      );
      return { success: true as const, walletAddress: row.address, walletId: row.id, networks: ['base-sepolia', 'base'] };
    },

    /** §4.4 POST /api/wallet/cdp */
    async createOrImport(userId: string, privateKey: string | undefined) {
      if (privateKey !== undefined && !/^0x[0-9a-fA-F]{64}$/.test(privateKey))
        throw badRequest('privateKey must be 0x followed by 64 hex characters');
      const p = provider();
      const generated = privateKey === undefined;
      const { generatePrivateKey, privateKeyToAccount } = await viemAccounts();
      const key = (privateKey ?? generatePrivateKey()) as `0x${string}`;
      const expected = privateKeyToAccount(key).address;
      const account = await p.importAccount(accountName(userId), key).catch(failed);
      if (account.address.toLowerCase() !== expected.toLowerCase()) failed(new Error('the provider imported a different address'));
      await deps.db
        .withUser(userId, (trx) =>
          cdpWalletsRepo.insert(trx, {
            userId,
            address: account.address,
            providerName: account.name,
            email: null,
            encryptedPrivateKey: generated ? encryptSecret(deps.walletKey, key) : null,
          }),
        )
        .catch((err) => {
          if (isUniqueViolation(err)) throw conflict('This wallet is already registered');
          throw err;
        });
      return { success: true as const, address: account.address, network: 'base-sepolia' as const };
    },

    /** §4.4 GET /api/wallet/cdp */
    info() {
      return { status: 'ok' as const, type: 'evm_wallet' as const, supportedChains: ['base', 'base-sepolia'] };
    },
  };
}

export type CdpWalletsService = ReturnType<typeof createCdpWalletsService>;
