/**
 * §4.17 file explorer on the web app, for the owner's session (docs/agents.md "File explorer"):
 * the backend's seven routes under the same base path `/api/browse`, with the same parameters,
 * limits, bodies, statuses and error texts (files.schemas.ts, the one files service), the agent
 * named by `?agentId=`. Another user's agent answers 404 exactly as a missing one (row-level
 * security decides); writes and git-sync pass the web app's cross-site check like every session
 * POST (docs/security.md "Cross-site requests").
 */

import type { FastifyRequest } from 'fastify';
import { BROWSE_ROUTES as R } from '../../../domains/files/files.schemas.ts';
import type { FilesService } from '../../../domains/files/files.service.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorSchema } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const common = { tags: ['files'] };
/** 403: a cross-site POST (the origin check) */
const errors = { 400: errorSchema, 401: errorSchema, 403: errorSchema, 404: errorSchema, 409: errorSchema, 500: errorSchema };
/** git routes: 503 GIT_UNAVAILABLE without the agent sandbox (git never runs with the platform's rights) */
const gitErrors = { ...errors, 503: errorSchema };

export const browseWebRoutes = (deps: { files: FilesService }): RouteModule<'session'> => {
  const files = (request: FastifyRequest & { query: { agentId?: string | undefined } }) =>
    deps.files.forAgent(currentUser(request).id, request.query.agentId);

  return {
    prefix: '/api/browse',
    session: async (app) => {
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
