/**
 * Wiring of the x402 gateway proxy (§4.11): the HTTP client on X402_GATEWAY_URL (none when unset:
 * the routes answer 503) with the platform's x402 payer when X402_PAYER_PRIVATE_KEY is set, and
 * the charges that make each user pay for their own `pay` calls through the platform's one ledger
 * service (platform.ts builds it).
 */
import type { Config } from '../config/env.ts';
import type { Db } from '../db/client.ts';
import type { LedgerService } from '../domains/payments/index.ts';
import { createHttpX402Gateway, createX402Charges, createX402Payer, createX402Service, type X402Gateway } from '../domains/x402/index.ts';

export function createX402(deps: {
  config: Pick<Config, 'X402_GATEWAY_URL' | 'X402_PAYER_PRIVATE_KEY' | 'X402_USER_DAILY_CAP_USD'>;
  db: Db;
  ledger: LedgerService;
  gateway?: X402Gateway;
}) {
  const { config } = deps;
  const payer = config.X402_PAYER_PRIVATE_KEY ? createX402Payer(config.X402_PAYER_PRIVATE_KEY as `0x${string}`) : undefined;
  const gateway =
    deps.gateway ?? (config.X402_GATEWAY_URL ? createHttpX402Gateway({ baseUrl: config.X402_GATEWAY_URL, payer }) : undefined);
  const charges = createX402Charges({
    db: deps.db,
    ledger: deps.ledger,
    dailyCapUsd: config.X402_USER_DAILY_CAP_USD,
  });
  return createX402Service({ db: deps.db, gateway, charges });
}
