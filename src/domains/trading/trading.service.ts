/**
 * Trading service (§4.5): the user's personal trading key (sealed at rest, never returned) and
 * calls passed through to the external trading service with key resolution personal → platform.
 */
import type { Config } from '../../config/env.ts';
import type { Db } from '../../db/client.ts';
import { decryptSecret, encryptSecret } from '../../lib/crypto.ts';
import { AppError } from '../../lib/errors.ts';
import type { TradingClient, TradingResult } from './trading.client.ts';
import { tradingRepo } from './trading.repo.ts';

export type TradingDeps = {
  db: Db;
  config: Pick<Config, 'TRADING_API_KEY'>;
  /** SECRETS_ENCRYPTION_KEY (32 bytes) */
  encryptionKey: Buffer;
  /** undefined when TRADING_API_URL is unset: every trading call answers 503 */
  client: TradingClient | undefined;
};

export function createTradingService(deps: TradingDeps) {
  const { db, encryptionKey } = deps;

  /** §4.5 key resolution: personal key, else the platform key, else 503 `{needsKey:true}`. */
  async function resolveKey(userId: string): Promise<string> {
    const row = await db.withUser(userId, (trx) => tradingRepo.findKey(trx, userId));
    if (row) return decryptSecret(encryptionKey, row.encrypted_key);
    if (deps.config.TRADING_API_KEY) return deps.config.TRADING_API_KEY;
    throw new AppError('TRADING_KEY_REQUIRED', 'No trading API key configured; add your own key', { needsKey: true });
  }

  async function run(userId: string, call: (client: TradingClient, key: string) => Promise<TradingResult>) {
    const client = deps.client;
    if (!client) throw new AppError('TRADING_NOT_CONFIGURED', 'Trading service not configured');
    const result = await call(client, await resolveKey(userId));
    if (result.ok) return { status: result.status, body: result.body };
    switch (result.reason) {
      case 'timeout':
        throw new AppError('TRADING_TIMEOUT', 'Trading service timed out');
      case 'unreachable':
        throw new AppError('TRADING_UNREACHABLE', 'Trading service unreachable');
      case 'bad_status':
        throw new AppError('TRADING_ERROR', 'Trading service error', { upstreamStatus: result.status });
      case 'invalid_json':
        throw new AppError('TRADING_INVALID_RESPONSE', 'Trading service returned an invalid response', { upstreamStatus: result.status });
    }
  }

  return {
    async hasKey(userId: string): Promise<boolean> {
      return db.withUser(userId, (trx) => tradingRepo.hasKey(trx, userId));
    },

    /** Replaces any existing key. Length and emptiness are checked by the route schema (§8: max 512). */
    async saveKey(userId: string, apiKey: string): Promise<void> {
      const sealed = encryptSecret(encryptionKey, apiKey);
      await db.withUser(userId, (trx) => tradingRepo.upsertKey(trx, userId, sealed));
    },

    async deleteKey(userId: string): Promise<void> {
      await db.withUser(userId, (trx) => tradingRepo.deleteKey(trx, userId));
    },

    balances: (userId: string, chains: string[]) => run(userId, (c, key) => c.balances(key, chains)),
    submitPrompt: (userId: string, input: { prompt: string; threadId?: string | undefined }) =>
      run(userId, (c, key) => c.submitPrompt(key, input)),
    jobStatus: (userId: string, jobId: string) => run(userId, (c, key) => c.jobStatus(key, jobId)),
  };
}

export type TradingService = ReturnType<typeof createTradingService>;
