/**
 * Paying an x402 challenge (§4.11 `pay`): when the gateway answers HTTP 402 with x402 payment
 * requirements, the platform's payer signs the payment with the official x402 client packages
 * (`@x402/fetch` wraps fetch, `@x402/evm` signs the `exact` scheme: an EIP-3009
 * transferWithAuthorization over USDC) and the request is retried with the signature; nothing here
 * speaks the protocol by hand. Signing is local (viem account), so it works offline and in tests.
 *
 * One interface (docs/architecture.md rule 4): the gateway client asks for a paying fetch; with no
 * payer configured (X402_PAYER_PRIVATE_KEY unset) the client refuses the 402 with a clear 502.
 */
import { createRequire } from 'node:module';
import type * as EvmClient from '@x402/evm/exact/client';
import type * as X402Fetch from '@x402/fetch';
import type * as ViemAccounts from 'viem/accounts';

// required when a payer is made (X402_PAYER_PRIVATE_KEY set), not at start: ~35 MB resident otherwise held for nothing
const requireCjs = createRequire(import.meta.url);

export interface X402Payer {
  /** the payer's address (the `from` of every authorization it signs) */
  readonly address: string;
  /**
   * A fetch that pays one x402 challenge of at most `maxUsd` US dollars (the user's `amount`):
   * the package's spend controls drop every payment option above it, so a gateway cannot make
   * the platform pay more than the user asked for.
   */
  payingFetch(maxUsd: number, base?: typeof fetch): typeof fetch;
}

export function createX402Payer(privateKey: `0x${string}`): X402Payer {
  const { registerExactEvmScheme } = requireCjs('@x402/evm/exact/client') as typeof EvmClient;
  const { wrapFetchWithPayment, x402Client } = requireCjs('@x402/fetch') as typeof X402Fetch;
  const { privateKeyToAccount } = requireCjs('viem/accounts') as typeof ViemAccounts;
  const account = privateKeyToAccount(privateKey);
  return {
    address: account.address,
    payingFetch(maxUsd, base = fetch) {
      const client = new x402Client();
      registerExactEvmScheme(client, { signer: account });
      client.setSpendControls({ maxAmountPerPayment: `$${maxUsd}` });
      return wrapFetchWithPayment(base, client) as typeof fetch;
    },
  };
}
