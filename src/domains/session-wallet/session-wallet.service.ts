/**
 * Session wallet (§2 Wallet, §4.4 GET/POST /api/wallet without address, GET /api/wallet/address):
 * one server-generated key pair per user. The private key is sealed with WALLET_ENCRYPTION_KEY
 * the moment it is generated and is never returned, logged or decrypted by any endpoint.
 */
import type { Config } from '../../config/env.ts';
import type { Db } from '../../db/client.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { encryptSecret } from '../../lib/crypto.ts';
import { badRequest, forbidden, notFound } from '../../lib/errors.ts';
import { viemAccounts } from '../../lib/viem.ts';
import { sessionWalletRepo } from './session-wallet.repo.ts';

/** §2: `network` is `base-sepolia` in responses. */
export const SESSION_WALLET_NETWORK = 'base-sepolia';

/** §4.4 features of the custodial (CDP) agentic wallet, in the specification's order. */
const CDP_FEATURES = ['create_wallet', 'get_balance', 'send_usdc', 'trade_tokens', 'x402_payments'] as const;

export type SessionWalletDeps = {
  db: Db;
  config: Pick<Config, 'CDP_PROJECT_ID'> & { configured: Pick<Config['configured'], 'cdp'> };
  /** WALLET_ENCRYPTION_KEY (32 bytes) */
  encryptionKey: Buffer;
};

export function createSessionWalletService(deps: SessionWalletDeps) {
  const { db, config, encryptionKey } = deps;

  return {
    /** §4.4: when CDP is configured GET /api/wallet describes the agentic wallet instead (no auth). */
    cdpInfo() {
      if (!config.configured.cdp) return null;
      return {
        agenticWallet: { status: 'configured' as const, projectId: config.CDP_PROJECT_ID ?? null, features: [...CDP_FEATURES] },
        instructions:
          'Agentic wallets are managed by the custodial wallet provider: create one with POST /api/wallet/create, ' +
          'then your agents can check balances, send USDC, trade tokens and pay x402 requests.',
      };
    },

    /** §4.4 GET /api/wallet (session). `balance` is '0': no chain is read for the session wallet. */
    async get(userId: string) {
      const w = await db.withUser(userId, (trx) => sessionWalletRepo.findWallet(trx, userId));
      if (!w) {
        return {
          address: null,
          balance: '0',
          network: SESSION_WALLET_NETWORK,
          hasWallet: false as const,
          message: 'No wallet yet. Create one with POST /api/wallet {"action":"create"}.',
        };
      }
      return { address: w.address, balance: '0', network: w.network, hasWallet: true as const, createdAt: w.created_at.toISOString() };
    },

    /** §4.4 POST /api/wallet `create`: 400 when the user already has one (primary key on user_id decides races). */
    async create(userId: string) {
      const { generatePrivateKey, privateKeyToAccount } = await viemAccounts();
      const privateKey = generatePrivateKey();
      const address = privateKeyToAccount(privateKey).address;
      const sealed = encryptSecret(encryptionKey, privateKey);
      try {
        const w = await db.withUser(userId, (trx) =>
          sessionWalletRepo.insertWallet(trx, { userId, address, encryptedPrivateKey: sealed, network: SESSION_WALLET_NETWORK }),
        );
        return {
          address: w.address,
          network: w.network,
          message: 'Wallet created. The private key is stored encrypted and cannot be exported.',
        };
      } catch (err) {
        if (isUniqueViolation(err, 'session_wallets_pkey')) throw badRequest('Wallet already exists');
        throw err;
      }
    },

    /** §4.4 `get_seed`: metadata only, never key material. */
    async seedInfo(userId: string) {
      const w = await db.withUser(userId, (trx) => sessionWalletRepo.findWallet(trx, userId));
      if (!w) throw notFound('No wallet found');
      return {
        address: w.address,
        network: w.network,
        createdAt: w.created_at.toISOString(),
        warning: 'The private key is stored encrypted on the server and is never shown or exported.',
      };
    },

    /** §4.4 `export_seed`: always 403. */
    exportSeed(): never {
      throw forbidden('Seed export is disabled: private keys never leave the server');
    },

    /** §4.4 GET /api/wallet/address: the session wallet's address, or null before one is created. */
    async address(userId: string): Promise<string | null> {
      const w = await db.withUser(userId, (trx) => sessionWalletRepo.findWallet(trx, userId));
      return w?.address ?? null;
    },
  };
}

export type SessionWalletService = ReturnType<typeof createSessionWalletService>;
