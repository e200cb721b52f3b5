/**
 * Every limit of the specification's §8 (and the few we set where it says "not shown"), in one
 * place (docs/architecture.md rule 7). Cite the section when you add one.
 */
export const LIMITS = {
  /** §8 password length, register */
  passwordMinLength: 8,
  /** not in the specification: argon2 input bound, so a 1 MB "password" cannot burn CPU */
  passwordMaxLength: 256,
  /** §8 referral code */
  referralCodeMaxLength: 20,
  /** §8 session cookie lifetime: 30 days */
  sessionTtlMs: 30 * 24 * 60 * 60 * 1000,
  /** password reset (§4.18 "not shown"; docs/security.md "Password reset"): a mailed link works once, for 30 minutes */
  passwordResetTokenTtlMs: 30 * 60 * 1000,
  /** window of PASSWORD_RESET_RATE_LIMIT and PASSWORD_RESET_EMAIL_RATE_LIMIT: requests per hour */
  passwordResetWindowMs: 60 * 60 * 1000,
  /** an account is mailed a new reset link at most once in this time; the one mailed before is still live (docs/identity.md "Password reset") */
  passwordResetResendMs: 10 * 60 * 1000,
  /** §8 agent name, after trim */
  agentNameMin: 1,
  agentNameMax: 64,
  /** profile name (path "not shown" in §4.1); same bound as an agent name */
  profileNameMax: 64,
  /** §8 API key name */
  apiKeyNameMax: 64,
  /** §8 trading key */
  tradingKeyMax: 512,
  /** §8 config backups kept */
  configBackupsKept: 10,
  /** §5 / issue: SIWE nonce lifetime (not shown in the specification): 10 minutes, single use */
  siweNonceTtlMs: 10 * 60 * 1000,
  /** NONCE_RATE_LIMIT window: nonces per IP per minute (docs/security.md) */
  nonceWindowMs: 60 * 1000,
  /** REGISTER_RATE_LIMIT window (docs/configuration.md): sign-ups per IP per hour */
  registerWindowMs: 60 * 60 * 1000,
  /** §8 AI rate limit window (the count is AI_RATE_LIMIT) */
  aiWindowMs: 60 * 1000,
  /** §8 demo chat window (the count is DEMO_RATE_LIMIT) */
  demoWindowMs: 60 * 60 * 1000,
  /** §4.12 / §8 health thresholds (percent) */
  healthDegradedAbove: 70,
  healthUnhealthyAbove: 85,
  /** referral credit given to both the new user and the referrer (amount not shown in §4.1) */
  referralCredit: 10,
  /** §4.14 workflows: bounds the specification leaves open (also CHECKs in migration 004) */
  workflowNameMax: 200,
  workflowDescriptionMax: 2000,
  workflowNodesMax: 100,
  /** length of a node's JSON-encoded `config` (§2) */
  workflowNodeConfigMax: 16_384,
  /** §4.12 heartbeat: default frequency and the largest accepted one (30 days) */
  heartbeatDefaultFrequency: '3h',
  heartbeatMaxFrequencyMs: 30 * 24 * 60 * 60 * 1000,
  heartbeatAgentIdMax: 200,
  /**
   * An agent's persona (docs/agents.md "Persona"; not in the specification): the configuration's
   * `systemPrompt` and heartbeat prompt (`agents.defaults.heartbeat.prompt`), in characters. Both
   * go to the model on every call, so a bound keeps one configuration from filling the context.
   */
  agentSystemPromptMax: 20_000,
  agentHeartbeatPromptMax: 20_000,
  /** §8 bridge inbox: default 50, max 100; default window 24 hours */
  bridgeInboxDefaultLimit: 50,
  bridgeInboxMaxLimit: 100,
  bridgeInboxWindowMs: 24 * 60 * 60 * 1000,
  /** bridge message content and reader name (not shown in §4.13; also CHECKs in migration 004) */
  bridgeContentMax: 16_000,
  bridgeReaderMax: 100,
  /** §4.5 GET /api/trading/balances default `chains` */
  tradingDefaultChains: ['base', 'polygon', 'mainnet', 'solana', 'unichain'],
  /** §4.5 prompt, threadId, jobId and chain list sizes: not shown; bounds so a request cannot be arbitrarily large */
  tradingPromptMax: 10_000,
  tradingIdMax: 200,
  tradingChainsMax: 20,
  /** §6 / §8 hosting webhook record TTL in the key-value store: 7 days (seconds, as Redis EX takes) */
  hostingStatusTtlSeconds: 7 * 24 * 60 * 60,
  /** §4.2 "not serializable" (depth not shown): configuration objects nest at most this deep */
  configMaxDepth: 64,
  /** §4.3 lookup prefix: the first 10 characters of a key (also its `keyPreview`) */
  apiKeyPrefixLength: 10,
  /** §4.3 longest string accepted as an API key to look up (ours are 43 chars); longer is invalid */
  apiKeyMaxLength: 200,
  /** API key limits (docs/payments.md "API keys"): agents one key may name */
  apiKeyAgentsMax: 100,
  /** a key's rate limit: requests per minute, at most */
  apiKeyRateLimitMax: 100_000,
  /** a rolled key's old secret keeps working this long unless the roll says otherwise (seconds) */
  apiKeyRollGraceDefaultSeconds: 24 * 60 * 60,
  /** the longest grace a roll may give the old secret (seconds): a week */
  apiKeyRollGraceMaxSeconds: 7 * 24 * 60 * 60,
  /** the furthest expiry a key may be given: ten years */
  apiKeyExpiryMaxMs: 10 * 366 * 24 * 60 * 60 * 1000,
  /** §1 item 3 / §8 agent container settings: the gateway port inside a container */
  agentGatewayPort: 18789,
  /**
   * Local driver, not in the specification (docs/agents.md "Agent uids"): the uids of one platform's
   * agents, from AGENT_UID_BASE. Ten million agents over a platform's life; a host has room for
   * about two hundred such ranges between 100,000 and 2^31.
   */
  agentUidRange: 10_000_000,
  /** lowest AGENT_UID_BASE: above the system's users and the first /etc/subuid ranges' start */
  agentUidBaseMin: 100_000,
  /** §8 gateway token size: 48 chars (24 bytes) from provisioning */
  gatewayTokenLength: 48,
  /** §8 gateway auth rate limit: 10 failed attempts per 60,000 ms window, then a 300,000 ms lockout (loopback exempt) */
  gatewayAuthMaxFailures: 10,
  gatewayAuthWindowMs: 60_000,
  gatewayAuthLockoutMs: 300_000,
  /** §8 / §4.12 health probe: 5 s per probe, poll every 2 s, 60 s overall */
  healthProbeTimeoutMs: 5_000,
  healthPollIntervalMs: 2_000,
  healthWaitTimeoutMs: 60_000,
  /** §8 chat WebSocket timeout (one reply on the agent's WebSocket chat) */
  chatWebSocketTimeoutMs: 30_000,
  /** §4.7 / §8 web agent limits by tier (starter 1, pro 3, enterprise 100); an unrecognized tier gets 1 */
  webAgentLimits: { starter: 1, pro: 3, enterprise: 100 } as Record<string, number>,
  webAgentLimitDefault: 1,
  /** §4.7 / §8 backend agent limits by plan; network unlimited */
  backendAgentLimits: { solo: 1, collective: 3, label: 10, network: Number.POSITIVE_INFINITY } as Record<string, number>,
  /** §4.7 / §8 provisioning call timeout (web → backend POST /api/deployments) */
  provisioningTimeoutMs: 15_000,
  /** other web → backend calls (logs, stats, rename sync, lifecycle): not shown; shorter so a page never hangs */
  backendCallTimeoutMs: 10_000,
  /** §8 agent logs and messages listing: default 50, max 100 */
  agentListDefault: 50,
  agentListMax: 100,
  /** deployment jobs (not in the specification): lease a worker holds and renews while deploying; attempts before `error` */
  deploymentLeaseMs: 30_000,
  deploymentMaxAttempts: 3,
  deploymentRetryBaseMs: 2_000,
  /**
   * Local driver, each agent's disk (docs/agents.md "Disk"; §8 says nothing about disk): MB its
   * workspace, home and process.log may use together, by §4.7 resource plan (planResources; half its
   * memory). The largest single file it may write is the same (RLIMIT_FSIZE). AGENT_DISK_QUOTA_MB
   * replaces these for every agent.
   */
  agentDiskQuotaMb: { underground: 1024, starter: 1024, pro: 2048, scale: 4096, enterprise: 8192, white_glove: 16384 } as Record<
    string,
    number
  >,
  /** a plan not in the table above (a Render plan name): the smallest quota */
  agentDiskQuotaDefaultMb: 1024,
  /** how often the local driver measures each running agent's disk use (a `du` in a child process) */
  agentDiskCheckIntervalMs: 60_000,
  /** a measure that takes longer is stopped, and the agent treated as over its quota until one finishes */
  agentDiskMeasureTimeoutMs: 60_000,
  /** process.log: rotated (copy then truncate) once larger than this; the copy, process.log.1, keeps this much */
  processLogMaxBytes: 8 * 1024 * 1024,
  /** how often the local driver looks at each running agent's process.log size */
  processLogCheckIntervalMs: 2_000,
  /** §2 Plans: models per plan (network and admins: all) */
  aiPlanModelCount: { solo: 3, collective: 5, label: 7, network: Number.POSITIVE_INFINITY } as Record<string, number>,
  /** §4.9 / §8 planned monthly token quotas (enforced only when AI_QUOTA_ENFORCE=true); network unlimited */
  aiMonthlyTokenQuota: { solo: 2_000_000, collective: 6_000_000, label: 20_000_000, network: Number.POSITIVE_INFINITY } as Record<
    string,
    number
  >,
  /** §4.10 / §8 demo chat: fixed max_tokens and the cap on each conversation entry */
  demoMaxTokens: 1024,
  demoConversationEntryMax: 4000,
  /** demo conversation entries kept (not shown; bounds the upstream prompt) */
  demoConversationMaxEntries: 50,
  /** AI chat input bounds (not shown in §4.9): messages per request, characters per message */
  aiMaxMessages: 500,
  aiMaxMessageChars: 200_000,
  /**
   * §8 session tokens: 100,000 per conversation session, compacted automatically at 80%
   * (docs/channels.md "Sessions"). Tokens are estimated at 4 characters each (the usual figure for
   * English text with OpenAI's and Anthropic's tokenizers): the platform does not know which
   * tokenizer the agent's model uses, and the estimate only decides when to compact.
   */
  sessionMaxTokens: 100_000,
  sessionCompactAtRatio: 0.8,
  sessionCharsPerToken: 4,
  /** what compaction keeps verbatim: the newest turns up to this share of the session limit (not shown) */
  sessionKeepRatio: 0.2,
  /** a summary the model writes is cut to this many characters (not shown) */
  sessionSummaryMaxChars: 40_000,
  /** §2 session.resetTriggers: two reset command words by default (OpenClaw's) */
  sessionResetTriggers: ['/new', '/reset'] as readonly string[],
  /** pairing codes a channel gives an unknown sender expire after an hour, as OpenClaw's do (not shown) */
  channelPairingTtlMs: 60 * 60 * 1000,
  /** pairing codes waiting for the owner at once, per channel: OpenClaw's cap of 3 (a crowd of strangers cannot fill the tab) */
  channelPairingsPending: 3,
  /** how often a backend process looks for channel connections to start, stop or take over (not shown; a change made through this process's API is acted on at once) */
  channelSyncMs: 5_000,
  /** how long the router's /models is trusted before GET /api/ai/models refreshes it in the background */
  aiCatalogRefreshMs: 60 * 60 * 1000,
  /**
   * AI usage rows wait at most this long in memory before their batch is written (usage.ts): a
   * write per request would cost each proxied call a statement beside it (docs/benchmarks.md). A crash,
   * not a shutdown, can lose the rows of this window.
   */
  aiUsageFlushMs: 100,
  /**
   * A process's spend holds stop counting this long after it last renewed them (migration 205):
   * longer than any model call with its fallbacks, so a live process's holds never lapse between
   * renewals (every third of it while it holds anything); a dead process's lapse after it.
   */
  spendHoldTtlMs: 10 * 60_000,
  /**
   * Output tokens a spend hold counts for a call without `max_tokens` when the model's context
   * window is unknown or nearly filled by the prompt (src/domains/ai/model-gateway.service.ts `mostCost`).
   */
  aiHoldMinOutputTokens: 4096,
  /** §8 top-up amounts in cents (§4.4: 5, 10, 25, 50 agent calls); the default is 1000 */
  topUpAmountsCents: [500, 1000, 2500, 5000],
  topUpDefaultCents: 1000,
  /** §4.6 / §8 calendar OAuth state: HMAC-signed, valid 10 minutes */
  calendarStateTtlMs: 10 * 60 * 1000,
  /** §4.6 / §8 availability: one-hour slots from 09:00 to 23:00 in the calendar's timezone */
  calendarSlotFirstHour: 9,
  calendarSlotEndHour: 23,
  /** §4.6 list: the default window is now to now plus 30 days */
  calendarListDefaultDays: 30,
  /** refresh an access token this long before it expires (not shown), so a call never races its expiry */
  calendarTokenRefreshMarginMs: 60 * 1000,
  /** one calendar provider call (not shown): a hung provider answers 502, not a hung request */
  calendarApiTimeoutMs: 10 * 1000,
  /** §8 signing-key cache (security events, §6): the RISC configuration and its JWKS, 24 hours */
  riscKeyCacheMs: 24 * 60 * 60 * 1000,
  /** not shown: an unknown `kid` refetches the JWKS at most this often, so forged kids cannot flood the provider */
  riscKeyRefetchCooldownMs: 30 * 1000,
  /** not shown: a failed security event is tried again after this, doubling, up to riscMaxAttempts */
  riscRetryBaseMs: 5 * 1000,
  riscMaxAttempts: 8,
  /**
   * Underground bus (§4.15, not shown; docs/underground.md "Delivery"): the window of
   * UNDERGROUND_BUS_RATE_LIMIT (messages per sending agent); one webhook call's time limit (connect
   * and answer); the lease a claimed delivery holds, well past that limit, after which another
   * worker may take it; deliveries in flight per process, and per target host across every process,
   * so one slow host holds at most two slots and never the whole bus.
   */
  undergroundBusSendWindowMs: 60_000,
  undergroundBusDeliveryTimeoutMs: 5_000,
  undergroundBusLeaseMs: 30_000,
  undergroundBusMaxInFlight: 16,
  undergroundBusMaxInFlightPerTarget: 2,
  /**
   * §2 Plans, A2A messages/day: agent-to-agent messages an account's agents may send together on
   * the Underground bus in one UTC day, by the owner's plan (admins: network's). Each recipient of
   * a message counts (docs/underground.md "Daily cap").
   */
  a2aMessagesPerDay: { solo: 100, collective: 500, label: 2_000, network: 10_000 } as Record<string, number>,
  /**
   * §2 Plans, skill limit: skills an agent may have, by the agent's plan; a plan not in the table
   * gets solo's (docs/agents.md "OpenClaw", "Skills").
   */
  planSkillLimit: { solo: 3, collective: 10, label: 25, network: 100 } as Record<string, number>,
  /** §8 tool web output: characters a web tool call returns to the model */
  toolWebOutputMaxChars: 50_000,
  /** §8 loop detection: 20 iterations within 5 minutes */
  toolLoopIterations: 20,
  toolLoopWindowMs: 5 * 60_000,
  /** §8 image max dimension (agent defaults): pixels of an image's longer side */
  imageMaxDimensionPx: 1200,
} as const;

/** Flood and slow-client limits of the gateway (docs/agents.md "Agent gateway limits"). */
export type GatewayLimits = {
  /** largest WebSocket message accepted (bytes); a larger one closes the socket with 1009 */
  wsMaxMessageBytes: number;
  /** WebSocket messages per second per socket (token bucket refill) and the bucket size */
  wsMessagesPerSecond: number;
  wsBurst: number;
  /** chat turns one socket may have waiting behind its running one; more are refused with an error frame */
  wsQueuePerSocket: number;
  /** model calls in flight at once for this agent (HTTP and WebSocket together) */
  maxConcurrentModelCalls: number;
  /** model calls waiting for a slot; beyond it HTTP answers 429 and WebSocket an error frame */
  modelQueue: number;
  /** characters of conversation a WebSocket keeps (oldest turns dropped first) */
  wsHistoryChars: number;
  /** time to receive the request headers, the whole request, and an idle keep-alive connection's next request */
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
};

export const DEFAULT_GATEWAY_LIMITS: GatewayLimits = {
  wsMaxMessageBytes: 256 * 1024,
  wsMessagesPerSecond: 5,
  wsBurst: 10,
  wsQueuePerSocket: 4,
  maxConcurrentModelCalls: 4,
  modelQueue: 32,
  wsHistoryChars: 200_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
};

/**
 * The header naming the API key a request to an agent was made with (docs/payments.md "API keys"):
 * the agent proxy sets it (and drops any a client sent), the built-in runtime passes it on to its
 * model call for that request, and the model gateway charges the call to that key when the key
 * is one of the calling agent's owner's. Here because all three read it, the runtime included.
 */
export const KEY_ID_HEADER = 'x-platform-key-id';
