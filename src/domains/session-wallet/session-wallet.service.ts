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
import { microsToUsd } from '../../lib/money.ts';
import { viemAccounts } from '../../lib/viem.ts';
import type { LedgerService } from '../payments/index.ts';
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
  /**
   * The payments ledger: the wallet's off-chain USD balance (card top-ups, admin credits, minus
   * paid gateway calls) is its ledger balance (docs/payments.md "The wallet's balance").
   */
  ledger: Pick<LedgerService, 'balance' | 'journal'>;
};

/** §4.4 writes an empty balance as "0"; any other balance is exact decimal USD ("0.05", "12.50"). */
const balanceText = (micros: number) => (micros === 0 ? '0' : microsToUsd(micros));

/** Most journal rows one GET /api/wallet/journal returns. */
export const JOURNAL_PAGE_MAX = 100;

export function createSessionWalletService(deps: SessionWalletDeps) {
  const { db, config, encryptionKey, ledger } = deps;

  const findWallet = (userId: string) => db.withUser(userId, (trx) => sessionWalletRepo.findWallet(trx, userId));

  /** A new key pair, sealed at once; the primary key on user_id refuses a second wallet (unique violation). */
  async function insertWallet(userId: string) {
    const { generatePrivateKey, privateKeyToAccount } = await viemAccounts();
    const privateKey = generatePrivateKey();
    const address = privateKeyToAccount(privateKey).address;
    const sealed = encryptSecret(encryptionKey, privateKey);
    return db.withUser(userId, (trx) =>
      sessionWalletRepo.insertWallet(trx, { userId, address, encryptedPrivateKey: sealed, network: SESSION_WALLET_NETWORK }),
    );
  }

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

    /**
     * §4.4 GET /api/wallet (session). `balance` is the wallet's ledger balance in USD (a decimal
     * string; no chain is read for the session wallet), "0" before a wallet exists.
     */
    async get(userId: string) {
      const w = await findWallet(userId);
      if (!w) {
        return {
          address: null,
          balance: '0',
          network: SESSION_WALLET_NETWORK,
          hasWallet: false as const,
          message: 'No wallet yet. Create one with POST /api/wallet {"action":"create"}.',
        };
      }
      const balance = balanceText(await ledger.balance(w.address));
      return { address: w.address, balance, network: w.network, hasWallet: true as const, createdAt: w.created_at.toISOString() };
    },

    /** §4.4 POST /api/wallet `create`: 400 when the user already has one (primary key on user_id decides races). */
    async create(userId: string) {
      try {
        const w = await insertWallet(userId);
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
      const w = await findWallet(userId);
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
      const w = await findWallet(userId);
      return w?.address ?? null;
    },

    /**
     * The user's session wallet address, creating the wallet when there is none (an admin's
     * credit needs somewhere to go). Concurrent callers agree: the loser of the insert reads the
     * winner's wallet.
     */
    async ensureAddress(userId: string): Promise<string> {
      const found = await findWallet(userId);
      if (found) return found.address;
      try {
        return (await insertWallet(userId)).address;
      } catch (err) {
        if (!isUniqueViolation(err, 'session_wallets_pkey')) throw err;
        const w = await findWallet(userId);
        if (!w) throw err;
        return w.address;
      }
    },

    /**
     * The session wallet's journal (its credits and debits, newest first) and balance. The wallet
     * is found under the user's row-level security, so only the caller's own address is ever
     * read; the journal itself is a money table, read on the owner connection by that address
     * (docs/payments.md "Who may touch the money tables").
     */
    async journal(userId: string, page: { limit: number; before?: number | undefined }) {
      const w = await findWallet(userId);
      if (!w) return { address: null, balance: '0', entries: [], nextBefore: null };
      const [balance, rows] = await Promise.all([ledger.balance(w.address), ledger.journal(w.address, page)]);
      return {
        address: w.address,
        balance: balanceText(balance),
        entries: rows.map((r) => ({
          id: r.id,
          kind: r.kind,
          amountUsd: microsToUsd(r.amountMicros),
          balanceAfterUsd: microsToUsd(r.balanceAfterMicros),
          description: r.description,
          note: r.note,
          createdAt: r.createdAt.toISOString(),
        })),
        nextBefore: rows.length === page.limit ? rows[rows.length - 1]!.id : null,
      };
    },
  };
}

export type SessionWalletService = ReturnType<typeof createSessionWalletService>;
