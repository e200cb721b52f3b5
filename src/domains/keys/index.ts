/**
 * API keys (§4.3): create, list, change, roll, delete, validate, and the limits a key carries.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export * from './keys.schemas.ts';
export {
  type AuthenticatedKey,
  createKeysService,
  type KeyLimits,
  type KeysService,
} from './keys.service.ts';
