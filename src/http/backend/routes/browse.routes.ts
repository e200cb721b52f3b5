/**
 * §4.17 file explorer (backend, bearer key K; base path `/api/browse`): every route names the
 * agent in the `agentId` query parameter; acting user in `x-user-id` (without it, the operator
 * account) as on every backend agent route. Paths are relative to the agent's workspace;
 * traversal in any form is 400 and touches nothing (docs/agents.md "File explorer"). The web app
 * serves the same routes to the owner's session (web/routes/browse.web.routes.ts); both take their
 * schemas from files.schemas.ts and their work from the one files service.
 */

import { BROWSE_ROUTES as R } from '../../../domains/files/files.schemas.ts';
import type { FilesService } from '../../../domains/files/files.service.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders, errorSchema } from '../../shared/schemas.ts';
import { actingUser } from '../acting-user.ts';

const common = {
  tags: ['files'],
  headers: documentedHeaders({ 'x-user-id': 'Acting user (user id, UUID)' }),
};
const errors = { 400: errorSchema, 401: errorSchema, 403: errorSchema, 404: errorSchema, 409: errorSchema, 500: errorSchema };
/** git routes: 503 GIT_UNAVAILABLE without the agent sandbox (git never runs with the platform's rights) */
const gitErrors = { ...errors, 503: errorSchema };

export const browseRoutes = (deps: { files: FilesService }): RouteModule<'bearer'> => {
  const files = (request: { headers: Record<string, string | string[] | undefined>; query: { agentId?: string | undefined } }) =>
    deps.files.forAgent(actingUser(request), request.query.agentId);

  return {
    prefix: '/api/browse',
    bearer: async (app) => {
      app.get('/tree', {
        schema: { ...common, ...R.tree, response: { ...R.tree.response, ...errors } },
        handler: async (request) => (await files(request)).tree(request.query.depth),
      });
      app.get('/read', {
        schema: { ...common, ...R.read, response: { ...R.read.response, ...errors } },
        handler: async (request) => (await files(request)).read(request.query.path),
      });
      app.post('/write', {
        schema: { ...common, ...R.write, response: { ...R.write.response, ...errors } },
        handler: async (request) => (await files(request)).write(request.body.path, request.body.content),
      });
      app.get('/git-status', {
        schema: { ...common, ...R.gitStatus, response: { ...R.gitStatus.response, ...gitErrors } },
        handler: async (request) => (await files(request)).gitStatus(),
      });
      app.get('/git-diff', {
        schema: { ...common, ...R.gitDiff, response: { ...R.gitDiff.response, ...gitErrors } },
        handler: async (request) => (await files(request)).gitDiff(request.query.path),
      });
      app.post('/git-sync', {
        schema: { ...common, ...R.gitSync, response: { ...R.gitSync.response, ...gitErrors } },
        handler: async (request) => (await files(request)).gitSync(request.body?.message),
      });
      app.get('/git-log', {
        schema: { ...common, ...R.gitLog, response: { ...R.gitLog.response, ...gitErrors } },
        handler: async (request) => (await files(request)).gitLog(request.query.limit),
      });
    },
  };
};
