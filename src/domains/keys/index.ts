/**
 * API keys (§4.3): create, list, delete, validate.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { invalidKey, keyProfile, VALIDATION_DESCRIPTION, validateKeyBody } from './keys.schemas.ts';
export { createKeysService, type KeyProfile, type KeysService } from './keys.service.ts';
