/**
 * Wiring of the x402 gateway proxy (§4.11): the HTTP client on X402_GATEWAY_URL (none when unset:
 * the routes answer 503) with the platform's x402 payer when X402_PAYER_PRIVATE_KEY is set.
 */
import type { Config } from '../config/env.ts';
import type { Db } from '../db/client.ts';
import { createHttpX402Gateway, type X402Gateway } from '../domains/x402/x402.client.ts';
import { createX402Payer } from '../domains/x402/x402.payer.ts';
import { createX402Service } from '../domains/x402/x402.service.ts';

export function createX402(deps: { config: Pick<Config, 'X402_GATEWAY_URL' | 'X402_PAYER_PRIVATE_KEY'>; db: Db; gateway?: X402Gateway }) {
  const { config } = deps;
  const payer = config.X402_PAYER_PRIVATE_KEY ? createX402Payer(config.X402_PAYER_PRIVATE_KEY as `0x${string}`) : undefined;
  const gateway =
    deps.gateway ?? (config.X402_GATEWAY_URL ? createHttpX402Gateway({ baseUrl: config.X402_GATEWAY_URL, payer }) : undefined);
  return createX402Service({ db: deps.db, gateway });
}
