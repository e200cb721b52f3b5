/**
 * §4.17 file explorer (backend, bearer key K; base path `/api/browse`): every route names the
 * agent in the `agentId` query parameter; acting user in `x-user-id` (without it, the operator
 * account) as on every backend agent route. Paths are relative to the agent's workspace;
 * traversal in any form is 400 and touches nothing (docs/agents.md "File explorer").
 */

import { z } from 'zod';
import type { FilesService } from '../../../domains/files/files.service.ts';
import { FILE_LIMITS } from '../../../domains/files/workspace-files.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders, errorSchema } from '../../shared/schemas.ts';
import { actingUser } from '../acting-user.ts';

const agentQuery = { agentId: z.string().min(1).max(200).describe("One of the acting user's agents") };
const common = {
  tags: ['files'],
  headers: documentedHeaders({ 'x-user-id': 'Acting user (user id, UUID)' }),
};
const errors = { 400: errorSchema, 401: errorSchema, 403: errorSchema, 404: errorSchema, 409: errorSchema, 500: errorSchema };
/** git routes: 503 GIT_UNAVAILABLE without the agent sandbox (git never runs with the platform's rights) */
const gitErrors = { ...errors, 503: errorSchema };
const GIT_AS_AGENT =
  " git runs as the agent's own user inside its sandbox (only the workspace visible; hooks, fsmonitor, external diff and textconv off); 503 `GIT_UNAVAILABLE` where there is no sandbox (bubblewrap).";
// documented one level deep: children are nodes of the same shape (a recursive schema would need a
// $ref the OpenAPI generator cannot name)
const treeNode = z.object({
  type: z.enum(['file', 'folder']),
  name: z.string(),
  path: z.string().describe('relative to the workspace; "" for the root'),
  children: z.array(z.object({}).passthrough()).optional().describe('folders only: nodes of this same shape, folders first'),
});

export const browseRoutes = (deps: { files: FilesService }): RouteModule<'bearer'> => {
  const files = (request: { headers: Record<string, string | string[] | undefined>; query: { agentId: string } }) =>
    deps.files.forAgent(actingUser(request), request.query.agentId);

  return {
    prefix: '/api/browse',
    bearer: async (app) => {
      app.get('/tree', {
        schema: {
          ...common,
          summary: "The agent's workspace as a tree (§4.17)",
          description: `Folders first, each level sorted alphabetically; ${[...['node_modules', '.git', '.next', 'dist', 'build', '.cache', '__pycache__']].join(', ')} left out; symlinks listed, never followed. \`depth\` default ${FILE_LIMITS.treeDepthDefault}, at most ${FILE_LIMITS.treeDepthMax}. 409 \`NO_LOCAL_WORKSPACE\` for agents not on this machine (Render).`,
          querystring: z.object({
            ...agentQuery,
            depth: z.coerce.number().int().min(1).max(FILE_LIMITS.treeDepthMax).default(FILE_LIMITS.treeDepthDefault),
          }),
          response: { 200: z.object({ ok: z.literal(true), root: treeNode }), ...errors },
        },
        handler: async (request) => (await files(request)).tree(request.query.depth),
      });

      app.get('/read', {
        schema: {
          ...common,
          summary: 'Reads a workspace file (§4.17)',
          description:
            "400 for a missing path, traversal (`..`, absolute, NUL, backslash, encoded separators), a symbolic link anywhere on the way (never followed), a folder, a FIFO or device, a file not owned by the agent's user, or a file over 1 MB. Opened through descriptors from the workspace down (docs/security.md).",
          querystring: z.object({ ...agentQuery, path: z.string().max(4096).optional() }),
          response: {
            200: z.object({ ok: z.literal(true), path: z.string(), content: z.string(), size: z.number(), modified: z.string() }),
            ...errors,
          },
        },
        handler: async (request) => (await files(request)).read(request.query.path ?? ''),
      });

      app.post('/write', {
        schema: {
          ...common,
          summary: 'Writes a workspace file, creating its folders (§4.17)',
          description:
            "400 for a missing path or content, traversal in any form, a symbolic link on the way, or a file not owned by the agent's user (nothing outside the workspace is touched). New folders and files belong to the agent's user.",
          querystring: z.object(agentQuery),
          body: z.object({ path: z.string().max(4096).optional(), content: z.string({ error: 'content is required' }) }),
          response: { 200: z.object({ ok: z.literal(true), path: z.string(), size: z.number() }), ...errors },
        },
        handler: async (request) => (await files(request)).write(request.body.path ?? '', request.body.content),
      });

      app.get('/git-status', {
        schema: {
          ...common,
          summary: "The workspace's git status (§4.17)",
          description: GIT_AS_AGENT.trim(),
          querystring: z.object(agentQuery),
          response: {
            200: z.object({
              ok: z.literal(true),
              isGitRepo: z.boolean(),
              branch: z.string().nullable(),
              remote: z.string().nullable(),
              changes: z.array(z.object({ status: z.string(), path: z.string() })),
              hasChanges: z.boolean(),
            }),
            ...gitErrors,
          },
        },
        handler: async (request) => (await files(request)).gitStatus(),
      });

      app.get('/git-diff', {
        schema: {
          ...common,
          summary: "The workspace's unstaged and staged diff (§4.17)",
          description: `\`path\` limits the diff to one file or folder. 500 \`NOT_A_REPOSITORY\` when the workspace is not a git repository.${GIT_AS_AGENT}`,
          querystring: z.object({ ...agentQuery, path: z.string().max(4096).optional() }),
          response: {
            200: z.object({ ok: z.literal(true), unstaged: z.string().nullable(), staged: z.string().nullable() }),
            ...gitErrors,
          },
        },
        handler: async (request) => (await files(request)).gitDiff(request.query.path),
      });

      app.post('/git-sync', {
        schema: {
          ...common,
          summary: 'Stages everything, commits and pushes when there is a remote (§4.17)',
          description: `\`message\` default \`sync changes\`. \`committed\` is false when there was nothing to commit. 500 when not a repository or staging or commit fails. Pushes from the agent's own network namespace.${GIT_AS_AGENT}`,
          querystring: z.object(agentQuery),
          body: z.object({ message: z.string().min(1).max(1000).optional() }).optional(),
          response: {
            200: z.object({
              ok: z.literal(true),
              committed: z.boolean(),
              pushed: z.boolean(),
              hash: z.string().nullable(),
              message: z.string(),
            }),
            ...gitErrors,
          },
        },
        handler: async (request) => (await files(request)).gitSync(request.body?.message ?? 'sync changes'),
      });

      app.get('/git-log', {
        schema: {
          ...common,
          summary: "The workspace's commits, newest first (§4.17)",
          description: GIT_AS_AGENT.trim(),
          querystring: z.object({
            ...agentQuery,
            limit: z.coerce.number().int().min(1).max(FILE_LIMITS.gitLogMax).default(FILE_LIMITS.gitLogDefault),
          }),
          response: {
            200: z.object({
              ok: z.literal(true),
              commits: z.array(
                z.object({ hash: z.string(), shortHash: z.string(), subject: z.string(), author: z.string(), date: z.string() }),
              ),
            }),
            ...gitErrors,
          },
        },
        handler: async (request) => (await files(request)).gitLog(request.query.limit),
      });
    },
  };
};
