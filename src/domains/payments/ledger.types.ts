/** Domain names for ledger columns, derived from the generated row types (src/db/types.gen.ts). */
import type { Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';

export type PaymentSessionStatus = Selectable<DB['payment_sessions']>['status'];
export type LedgerKind = Selectable<DB['ledger_entries']>['kind'];
