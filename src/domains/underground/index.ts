/**
 * The Underground (§4.15): agents' events, wallets, royalty splits and the message bus.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */

export {
  BUS_MAX_ATTEMPTS,
  BUS_MAX_BACKOFF_MS,
  BUS_RETRY_BASE_MS,
  type BusService,
  type ClaimedDelivery,
  createBusService,
} from './bus.service.ts';
export { BUS_MESSAGE_MAX_AGE_MS } from './bus-message.rules.ts';
export type { BusSigner } from './bus-signer.rules.ts';
export { AMPLIFY_MAX_RECIPIENTS, BOOKING_ACTIONS, BOOKING_MAX_PRICE_USDC, BOOKING_MAX_ROUNDS } from './bus-steps.service.ts';
export {
  balanceSchema,
  createEventBody,
  createSplitBody,
  createWalletBody,
  eventSchema,
  splitResultSchema,
  walletSchema,
} from './underground.schemas.ts';
export type { UndergroundService } from './underground.service.ts';
export type { UndergroundWallets } from './underground-wallets.service.ts';

import type { Config } from '../../config/env.ts';
import type { Secrets } from '../../config/secrets.ts';
import type { Db } from '../../db/client.ts';
import type { LedgerService } from '../payments/index.ts';
import { createBusSigner } from './bus-signer.rules.ts';
import { createUndergroundService } from './underground.service.ts';
import { createUndergroundWallets } from './underground-wallets.service.ts';

/**
 * The domain's services, built together: events and royalty splits (paid through the platform's
 * one ledger service), agent wallets, signing bus messages for an agent.
 */
export function createUnderground(deps: { config: Config; db: Db; secrets: Secrets; ledger: LedgerService }) {
  return {
    underground: createUndergroundService({ db: deps.db, ledger: deps.ledger }),
    wallets: createUndergroundWallets({ db: deps.db, walletKey: deps.secrets.walletEncryptionKey, rpcUrl: deps.config.BASE_RPC_URL }),
    signer: createBusSigner({ db: deps.db, walletKey: deps.secrets.walletEncryptionKey }),
  };
}

export type Underground = ReturnType<typeof createUnderground>;
