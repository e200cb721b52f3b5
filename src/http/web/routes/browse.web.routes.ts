/**
 * §4.17 file explorer on the web app, for the owner's session (docs/agents.md "File explorer"):
 * the backend's file-explorer routes (shared/browse-handlers.ts) under the same base path `/api/browse`,
 * the agent named by `?agentId=`. Another user's agent answers 404 exactly as a missing one
 * (row-level security decides); writes and git-sync pass the web app's cross-site check like every
 * session POST (docs/security.md "Cross-site requests").
 */
import type { FilesService } from '../../../domains/files/index.ts';
import { registerBrowseRoutes } from '../../shared/browse-handlers.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { currentUser } from '../../shared/session.ts';

export const browseWebRoutes = (deps: { files: FilesService }): RouteModule<'session'> => ({
  prefix: '/api/browse',
  session: async (app) => registerBrowseRoutes(app, { files: deps.files, userOf: (request) => currentUser(request).id }),
});
