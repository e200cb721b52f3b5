/**
 * Stablecoin balances and custodial wallets (§4.4).
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */

export { createCdpClient } from './cdp.client.ts';
export { type CdpWalletsService, createCdpWalletsService } from './cdp-wallets.service.ts';
export { createStablecoinBalanceReader, type StablecoinBalanceReader } from './stablecoin-balances.client.ts';
