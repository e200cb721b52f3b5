/**
 * Accounts and sign-in (§4.1, §5): users, sessions, passwords, wallet sign-in, identity-provider and code-host sign-in, password reset, and who is an admin.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export * from './accounts.schemas.ts';
export { type AccountsService, type CachedSession, createAccountsService, type NewSession, type SessionUser } from './accounts.service.ts';
export { type AdminFacts, isAdminUser } from './admin.rules.ts';
export { allowAllBotVerifier, type BotVerifier, createSiteverifyBotVerifier } from './bot-verifier.client.ts';
export { createExternalSignIn, type ExternalSignIn, type SignInStep } from './external-signin.service.ts';
export { createSmtpMailer, defaultMailFrom } from './mailer.client.ts';
export { type ExternalProvider, OAUTH_STATE_TTL_MS, oauthStateCookieName } from './oauth-state.rules.ts';
export {
  createAdminResetLinks,
  createPasswordResetService,
  type PasswordResetService,
  RESET_REQUESTED,
} from './password-reset.service.ts';
export { createChainSignatureVerifier, type SignatureVerifier } from './siwe-verifier.client.ts';
