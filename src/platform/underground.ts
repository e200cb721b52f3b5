/** The Underground services (§4.15): events and royalty splits (paid through the ledger), agent wallets, signing bus messages for an agent. */
import type { Config } from '../config/env.ts';
import type { Secrets } from '../config/secrets.ts';
import type { Db } from '../db/client.ts';
import type { LedgerService } from '../domains/payments/ledger/ledger.service.ts';
import { createBusSigner } from '../domains/underground/bus-signer.rules.ts';
import { createUndergroundService } from '../domains/underground/underground.service.ts';
import { createUndergroundWallets } from '../domains/underground/underground-wallets.service.ts';

/** Splits pay through the platform's one ledger service (platform.ts builds it). */
export function createUnderground(deps: { config: Config; db: Db; secrets: Secrets; ledger: LedgerService }) {
  return {
    underground: createUndergroundService({ db: deps.db, ledger: deps.ledger }),
    wallets: createUndergroundWallets({ db: deps.db, walletKey: deps.secrets.walletEncryptionKey, rpcUrl: deps.config.BASE_RPC_URL }),
    signer: createBusSigner({ db: deps.db, walletKey: deps.secrets.walletEncryptionKey }),
  };
}

export type Underground = ReturnType<typeof createUnderground>;
