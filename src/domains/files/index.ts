/**
 * The file explorer (§4.17): an agent's workspace, read and written without trusting it.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { BROWSE_ROUTES } from './files.schemas.ts';
export { createFilesService, type FilesService } from './files.service.ts';
