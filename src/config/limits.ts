/**
 * Every limit of the specification's §8 (and the few we set where it says "not shown"), in one
 * place (DESIGN rule 7). Cite the section when you add one.
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
  /** CONFIG.md REGISTER_RATE_LIMIT window: sign-ups per IP per hour */
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
} as const;
