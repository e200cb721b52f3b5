/**
 * The user's stored agent configuration and its backups (§4.2).
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { type ConfigService, createConfigService, INITIAL_BACKUP_ID } from './agent-config.service.ts';
