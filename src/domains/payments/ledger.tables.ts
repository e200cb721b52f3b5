/** Kysely types of the payments ledger (migration 020), added to DB by module augmentation. */
import type { ColumnType, Generated } from 'kysely';

declare module '../../db/schema.ts' {
  interface DB {
    wallet_balances: WalletBalancesTable;
    payment_sessions: PaymentSessionsTable;
    ledger_entries: LedgerEntriesTable;
  }
}

type Ts = ColumnType<Date, Date | string | undefined, Date | string>;

export interface WalletBalancesTable {
  address: string;
  balance_micros: Generated<number>;
  updated_at: Generated<Date>;
}

export type PaymentSessionStatus = 'active' | 'closed' | 'expired';

export interface PaymentSessionsTable {
  id: Generated<string>;
  token_hash: Buffer;
  address: string;
  user_id: string | null;
  deposit_micros: number;
  remaining_micros: Generated<number>;
  debit_count: Generated<number>;
  status: Generated<PaymentSessionStatus>;
  expires_at: Ts;
  created_at: Generated<Date>;
  ended_at: Date | null;
  open_salt: string | null;
}

export type LedgerKind = 'credit' | 'debit' | 'session_open' | 'session_debit' | 'session_close' | 'session_expire' | 'session_refund';

export interface LedgerEntriesTable {
  id: Generated<number>;
  kind: LedgerKind;
  address: string;
  wallet_delta: Generated<number>;
  session_id: string | null;
  session_delta: Generated<number>;
  event_id: string | null;
  nonce: string | null;
  plugin: string | null;
  signature: string | null;
  remaining_after: number | null;
  source: string | null;
  created_at: Generated<Date>;
}
