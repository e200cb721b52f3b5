/**
 * The trading service (§4.5).
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { createHttpTradingClient, isTradingJobId, type TradingClient } from './trading.client.ts';
export { createTradingService, type TradingService } from './trading.service.ts';
