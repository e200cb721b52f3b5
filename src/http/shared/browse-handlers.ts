/**
 * The seven §4.17 file-explorer routes and git-init (docs/agents.md "File explorer"), declared once for both
 * apps: the backend serves them to the bearer key with the acting user of `x-user-id`, the web app
 * to the owner's session. Both use the same paths under `/api/browse`, the same schemas
 * (files.schemas.ts), statuses and error texts, and the one files service; an app's route module
 * says only who the caller is and which headers it documents.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type FilesService, BROWSE_ROUTES as R } from '../../domains/files/index.ts';
import { isAppError } from '../../lib/errors.ts';
import type { App } from './base-app.ts';
import { sendError } from './error-handler.ts';
import { errorResponses, errorSchema } from './schemas.ts';

/** 403: another user's agent on the backend, a cross-site POST on the web app (the origin check) */
const errors = errorResponses(400, 401, 403, 404, 409, 500);
/** git routes: 503 GIT_UNAVAILABLE without the agent sandbox (git never runs with the platform's rights) */
const gitErrors = { ...errors, 503: errorSchema };

/**
 * git-diff and git-sync on a workspace that is not a repository: §4.17's 500 `NOT_A_REPOSITORY`,
 * answered as the catalogue says, but logged as the known state it is (every new built-in agent's
 * workspace is one): one warn line without a stack, not the error handler's error line with a trace.
 */
async function notARepositoryAsWarning<T>(request: FastifyRequest, reply: FastifyReply, run: () => Promise<T>): Promise<T | FastifyReply> {
  try {
    return await run();
  } catch (err) {
    if (!isAppError(err) || err.id !== 'NOT_A_REPOSITORY') throw err;
    request.log.warn({ code: err.id, status: err.status }, err.message);
    return sendError(reply, err);
  }
}

export type BrowseRouteOptions = {
  files: FilesService;
  /** the user the request acts for (its session's, or the backend's acting user) */
  userOf: (request: FastifyRequest) => string;
  /** schema parts every route shares in this app (documented headers) */
  common?: Record<string, unknown>;
};

export function registerBrowseRoutes(app: App, options: BrowseRouteOptions): void {
  const common = { tags: ['files'], ...options.common };
  // another user's agent answers exactly as a missing one: row-level security decides
  const files = (request: FastifyRequest & { query: { agentId?: string | undefined } }) =>
    options.files.forAgent(options.userOf(request), request.query.agentId);

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
  app.post('/git-init', {
    schema: { ...common, ...R.gitInit, response: { ...R.gitInit.response, ...gitErrors } },
    handler: async (request) => (await files(request)).gitInit(),
  });
  app.get('/git-diff', {
    schema: { ...common, ...R.gitDiff, response: { ...R.gitDiff.response, ...gitErrors } },
    handler: async (request, reply) =>
      notARepositoryAsWarning(request, reply, async () => (await files(request)).gitDiff(request.query.path)),
  });
  app.post('/git-sync', {
    schema: { ...common, ...R.gitSync, response: { ...R.gitSync.response, ...gitErrors } },
    handler: async (request, reply) =>
      notARepositoryAsWarning(request, reply, async () => (await files(request)).gitSync(request.body?.message)),
  });
  app.get('/git-log', {
    schema: { ...common, ...R.gitLog, response: { ...R.gitLog.response, ...gitErrors } },
    handler: async (request) => (await files(request)).gitLog(request.query.limit),
  });
}
