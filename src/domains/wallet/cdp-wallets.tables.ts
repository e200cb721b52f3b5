/** Kysely types of the custodial wallet table (migration 052). */
import type { Generated } from 'kysely';

declare module '../../db/schema.ts' {
  interface DB {
    cdp_wallets: CdpWalletsTable;
  }
}

export interface CdpWalletsTable {
  id: Generated<string>;
  user_id: string;
  address: string;
  /** the account's name at the provider */
  provider_name: string;
  email: string | null;
  network: Generated<string>;
  /** only for keys the platform generated: sealed with WALLET_ENCRYPTION_KEY (`v1.…`) */
  encrypted_private_key: string | null;
  created_at: Generated<Date>;
}
