/** Kysely types of the trading domain's tables (migration 005). */
import type { Generated } from 'kysely';

declare module '../../db/schema.ts' {
  interface DB {
    trading_keys: TradingKeysTable;
  }
}

export interface TradingKeysTable {
  user_id: string;
  /** `v1.<iv>.<tag>.<ciphertext>` from encryptSecret with SECRETS_ENCRYPTION_KEY; never the key itself */
  encrypted_key: string;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
