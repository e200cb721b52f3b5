/**
 * The payment services (docs/payments.md, §4.4, §4.8): the card processor with top-ups and
 * subscriptions, pre-funded payment sessions, and the v1 gateway with its plugins and MPP. Every
 * balance moves through the ledger it is given. platform.ts builds them through this one call.
 */
import type { AgentClient } from '../domains/agents/index.ts';
import type { AiService } from '../domains/ai/index.ts';
import {
  createAgentChat,
  createAudioClient,
  createMppMethod,
  createPaidCallsService,
  createPaymentSessionsService,
  createPlugins,
  createReceiptSigner,
  createStripeProcessor,
  createSubscriptionsService,
  createTopUpService,
  deriveReceiptKey,
  gatewayCheckout,
  type LedgerService,
} from '../domains/payments/index.ts';
import type { SessionCache } from '../lib/evicting-cache.ts';
import type { Logger } from '../lib/logger.ts';
import type { RateLimiter } from '../lib/rate-limiter.ts';
import type { PlatformDeps } from '../platform.ts';

export function createPaymentServices(o: {
  deps: PlatformDeps;
  log: Logger;
  ledger: LedgerService;
  ai: AiService;
  agentClient: AgentClient;
  rateLimiter: RateLimiter;
  sessionCache: SessionCache;
}) {
  const { deps, log, ledger, ai, agentClient, rateLimiter, sessionCache } = o;
  const { config, db } = deps;
  const cardProcessor =
    deps.cardProcessor ??
    (config.STRIPE_SECRET_KEY
      ? createStripeProcessor({
          secretKey: config.STRIPE_SECRET_KEY,
          webhookSecret: config.STRIPE_WEBHOOK_SECRET,
          apiUrl: config.STRIPE_API_URL,
          timeoutMs: config.STRIPE_TIMEOUT_MS,
        })
      : undefined);
  const topUp = createTopUpService({ processor: cardProcessor, ledger, publicUrl: config.PUBLIC_URL, logger: log });
  const subscriptions = createSubscriptionsService({ db, processor: cardProcessor, publicUrl: config.PUBLIC_URL, sessionCache });
  const paymentChainId = config.TEMPO_TESTNET ? 42431 : 4217;
  const paymentSessions = createPaymentSessionsService({
    db,
    signer: createReceiptSigner(
      (config.PAYMENT_RECEIPT_KEY as `0x${string}` | undefined) ?? deriveReceiptKey(deps.secrets.secretsEncryptionKey),
      paymentChainId,
    ),
    chainId: paymentChainId,
    ttlMs: config.PAYMENT_SESSION_TTL_MS,
    ...(deps.now ? { now: deps.now } : {}),
    ledger,
  });
  const gateway = createPaidCallsService({
    db,
    ledger,
    sessions: paymentSessions,
    plugins: createPlugins({
      ai,
      audio: createAudioClient({ baseUrl: config.OPENAI_BASE_URL, apiKey: config.OPENAI_API_KEY, timeoutMs: config.AI_TIMEOUT_MS }),
      agentChat: createAgentChat({ agentClient, timeoutMs: config.AI_TIMEOUT_MS }),
    }),
    mpp: createMppMethod({
      db: db.kysely,
      secret: deps.secrets.secretsEncryptionKey,
      recipient: config.MPP_RECIPIENT,
      currency: config.MPP_CURRENCY,
      rpcUrl: config.TEMPO_RPC_URL,
      challengeTtlMs: config.MPP_CHALLENGE_TTL_MS,
      confirmations: config.MPP_CONFIRMATIONS,
      ...(deps.now ? { now: () => deps.now!().getTime() } : {}),
    }),
    // the 402's `stripe.checkoutUrl`: a checkout for the plugin's price (credited to the wallet
    // when one is named, like a top-up; otherwise a plain card payment)
    checkout: deps.gatewayCheckout ?? (cardProcessor ? gatewayCheckout(cardProcessor, config.PUBLIC_URL, rateLimiter) : undefined),
    // the platform's log (not only a test's): a failed plugin call must leave a line saying why
    logger: log,
  });
  return { topUp, subscriptions, paymentSessions, gateway };
}
