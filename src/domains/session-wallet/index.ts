/**
 * The user's session wallet (§4.4).
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { createSessionWalletService, JOURNAL_PAGE_MAX, type SessionWalletService } from './session-wallet.service.ts';
