/**
 * Administration (docs/admin.md): the admin setup link, users and their plans, and credits through the ledger.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { ADMIN_CREDIT_MAX_USD, ADMIN_CREDIT_NOTE_MAX, type AdminService, createAdminService, IDEMPOTENCY_KEY } from './admin.service.ts';
