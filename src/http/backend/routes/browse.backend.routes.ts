/**
 * §4.17 file explorer (backend, bearer key K; base path `/api/browse`): every route names the
 * agent in the `agentId` query parameter; acting user in `x-user-id` (without it, the operator
 * account) as on every backend agent route. Paths are relative to the agent's workspace;
 * traversal in any form is 400 and touches nothing (docs/agents.md "File explorer"). The routes
 * themselves are shared/browse-handlers.ts, which the web app serves to the owner's session too.
 */
import type { FilesService } from '../../../domains/files/index.ts';
import { registerBrowseRoutes } from '../../shared/browse-handlers.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders } from '../../shared/schemas.ts';
import { actingUser } from '../acting-user.ts';

export const browseRoutes = (deps: { files: FilesService }): RouteModule<'bearer'> => ({
  prefix: '/api/browse',
  bearer: async (app) =>
    registerBrowseRoutes(app, {
      files: deps.files,
      userOf: (request) => actingUser(request),
      common: { headers: documentedHeaders({ 'x-user-id': 'Acting user (user id, UUID)' }) },
    }),
});
