/**
 * The services over outside systems a user reaches through the platform: the trading service
 * (§4.5), the hosting status store (§4.12) and custodial wallets (§4.4). Each takes the real
 * client when its settings are present (tests pass fakes through PlatformDeps), none otherwise.
 */
import { createHostingStatusService, createUpstashStatusStore } from '../domains/hosting-status/index.ts';
import { createHttpTradingClient, createTradingService } from '../domains/trading/index.ts';
import { createCdpClient, createCdpWalletsService } from '../domains/wallet/index.ts';
import type { PlatformDeps } from '../platform.ts';

export function createIntegrationServices(deps: PlatformDeps) {
  const { config, db } = deps;
  const trading = createTradingService({
    db,
    config,
    encryptionKey: deps.secrets.secretsEncryptionKey,
    client:
      deps.tradingClient ??
      (config.TRADING_API_URL
        ? createHttpTradingClient({ baseUrl: config.TRADING_API_URL, timeoutMs: config.TRADING_TIMEOUT_MS })
        : undefined),
  });
  const hostingStatus = createHostingStatusService({
    db,
    config,
    store:
      deps.statusStore ??
      (config.KV_REST_API_URL && config.KV_REST_API_TOKEN
        ? createUpstashStatusStore({ url: config.KV_REST_API_URL, token: config.KV_REST_API_TOKEN, timeoutMs: config.KV_TIMEOUT_MS })
        : undefined),
    logger: deps.logger,
    ...(deps.now ? { now: deps.now } : {}),
  });
  const cdpWallets = createCdpWalletsService({
    db,
    walletKey: deps.secrets.walletEncryptionKey,
    provider:
      config.configured.cdp && config.CDP_API_KEY_ID && config.CDP_API_KEY_SECRET
        ? createCdpClient({
            apiUrl: config.CDP_API_URL,
            apiKeyId: config.CDP_API_KEY_ID,
            apiKeySecret: config.CDP_API_KEY_SECRET,
            walletSecret: config.CDP_WALLET_SECRET,
            ...(config.CDP_IMPORT_PUBLIC_KEY ? { importPublicKey: config.CDP_IMPORT_PUBLIC_KEY.replace(/\\n/g, '\n') } : {}),
          })
        : undefined,
  });
  return { trading, hostingStatus, cdpWallets };
}
