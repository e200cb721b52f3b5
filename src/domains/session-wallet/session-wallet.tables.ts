/** Kysely types of the session wallet's table (migration 005). */
import type { Generated } from 'kysely';

declare module '../../db/schema.ts' {
  interface DB {
    session_wallets: SessionWalletsTable;
  }
}

export interface SessionWalletsTable {
  /** primary key: one wallet per user */
  user_id: string;
  address: string;
  /** `v1.<iv>.<tag>.<ciphertext>` from encryptSecret with WALLET_ENCRYPTION_KEY; never the key itself */
  encrypted_private_key: string;
  network: Generated<string>;
  created_at: Generated<Date>;
}
