/**
 * §4.17 file explorer: what each of its routes (§4.17's seven and git-init) takes and answers, written once for both apps
 * (the backend with its key, the web app with the owner's session; docs/agents.md "File explorer"),
 * so parameters, limits, bodies and documented answers cannot drift apart between them. The route
 * modules add who may call (tags, headers, the error responses of their scope) and one service call each.
 */
import { z } from 'zod';
import { EXCLUDED_DIRS, FILE_LIMITS } from './workspace-files.service.ts';

// optional here, checked by the files service: a missing or empty id answers the one text
// `agentId required` on both apps rather than a generic validation message
const agentQuery = {
  agentId: z.string().max(200).optional().describe("The agent, one of the caller's (required: 400 `agentId required`)"),
};
// more UTF-16 units than 4095 is more bytes than Linux's PATH_MAX takes; bytes are counted by the service
const relPath = z.string().max(4095, { error: 'Invalid path: longer than 4095 bytes' });

const GIT_AS_AGENT =
  " git runs as the agent's own user inside its sandbox (only the workspace visible; hooks, fsmonitor, external diff and textconv off); 503 `GIT_UNAVAILABLE` where there is no sandbox (bubblewrap).";

// documented one level deep: children are nodes of the same shape (a recursive schema would need a
// $ref the OpenAPI generator cannot name)
/** The git status fields: GET /git-status answers them, and POST /git-init its status after. */
const gitStatus = {
  isGitRepo: z.boolean(),
  branch: z.string().nullable(),
  remote: z.string().nullable(),
  changes: z.array(z.object({ status: z.string(), path: z.string() })),
  hasChanges: z.boolean(),
};

const treeNode = z.object({
  type: z.enum(['file', 'folder']),
  name: z.string(),
  path: z.string().describe('relative to the workspace; "" for the root'),
  children: z.array(z.object({}).passthrough()).optional().describe('folders only: nodes of this same shape, folders first'),
});

export const BROWSE_ROUTES = {
  tree: {
    summary: "The agent's workspace as a tree (§4.17)",
    description: `Folders first, each level sorted alphabetically; ${[...EXCLUDED_DIRS].join(', ')} left out; symlinks listed, never followed. \`depth\` default ${FILE_LIMITS.treeDepthDefault}, at most ${FILE_LIMITS.treeDepthMax} (a larger one is capped). 404 \`NO_WORKSPACE\` before the agent was first started here; 409 \`NO_LOCAL_WORKSPACE\` for agents not on this machine (Render).`,
    querystring: z.object({
      ...agentQuery,
      // §4.17 "cap 4": a larger depth is served at 4, not refused
      depth: z.coerce
        .number()
        .int()
        .min(1)
        .transform((n) => Math.min(n, FILE_LIMITS.treeDepthMax))
        .default(FILE_LIMITS.treeDepthDefault)
        .describe(`default ${FILE_LIMITS.treeDepthDefault}, at most ${FILE_LIMITS.treeDepthMax} (larger values are capped)`),
    }),
    response: { 200: z.object({ ok: z.literal(true), root: treeNode }) },
  },
  read: {
    summary: 'Reads a workspace file (§4.17)',
    description: `400 for a missing path, traversal (\`..\`, absolute, NUL, backslash, encoded separators), a symbolic link anywhere on the way (never followed), a folder, a FIFO or device, a file not owned by the agent's user, or a file over ${FILE_LIMITS.readMaxBytes / 1024 / 1024} MB. Content is read as UTF-8. Opened through descriptors from the workspace down (docs/security.md).`,
    querystring: z.object({ ...agentQuery, path: relPath.optional() }),
    response: { 200: z.object({ ok: z.literal(true), path: z.string(), content: z.string(), size: z.number(), modified: z.string() }) },
  },
  write: {
    summary: 'Writes a workspace file, creating its folders (§4.17)',
    description:
      "Replaces the file's content (UTF-8). 400 for a missing path or content, traversal in any form, a symbolic link on the way, or a file not owned by the agent's user (nothing outside the workspace is touched). New folders and files belong to the agent's user. 409 while the workspace is over its disk quota (docs/agents.md \"Disk\"), unless the write makes an existing file no larger.",
    querystring: z.object(agentQuery),
    body: z.object({ path: relPath.optional(), content: z.string({ error: 'content is required' }) }),
    response: { 200: z.object({ ok: z.literal(true), path: z.string(), size: z.number() }) },
  },
  gitStatus: {
    summary: "The workspace's git status (§4.17)",
    description: `\`isGitRepo\` false (and no changes) when the workspace is not a git repository.${GIT_AS_AGENT}`,
    querystring: z.object(agentQuery),
    response: {
      200: z.object({ ok: z.literal(true), ...gitStatus }),
    },
  },
  gitInit: {
    summary: 'Makes the workspace a git repository (file explorer)',
    description: `Not in §4.17; our addition (docs/agents.md "File explorer"): \`git init\` (branch \`main\`) in the workspace, and a \`.gitignore\` naming \`logs/\`, \`openclaw.json\` and \`node_modules/\` (the runtime's logs and configuration are the platform's, not the agent's work) unless the workspace has one. A workspace that is a repository already is left as it is (\`initialized\` false). Answers the git status after, as GET /git-status does. 409 while the workspace is over its disk quota.${GIT_AS_AGENT}`,
    querystring: z.object(agentQuery),
    response: {
      200: z.object({
        ok: z.literal(true),
        initialized: z.boolean().describe('true when this call made the workspace a repository'),
        ...gitStatus,
      }),
    },
  },
  gitDiff: {
    summary: "The workspace's unstaged and staged diff (§4.17)",
    description: `\`path\` limits the diff to one file or folder. 500 \`NOT_A_REPOSITORY\` when the workspace is not a git repository.${GIT_AS_AGENT}`,
    querystring: z.object({ ...agentQuery, path: relPath.optional() }),
    response: { 200: z.object({ ok: z.literal(true), unstaged: z.string().nullable(), staged: z.string().nullable() }) },
  },
  gitSync: {
    summary: 'Stages everything, commits and pushes when there is a remote (§4.17)',
    description: `\`message\` default \`sync changes\`. \`committed\` is false when there was nothing to commit. 500 when not a repository or staging or commit fails. Pushes from the agent's own network namespace.${GIT_AS_AGENT}`,
    querystring: z.object(agentQuery),
    body: z.object({ message: z.string().min(1).max(1000).optional() }).optional(),
    response: {
      200: z.object({ ok: z.literal(true), committed: z.boolean(), pushed: z.boolean(), hash: z.string().nullable(), message: z.string() }),
    },
  },
  gitLog: {
    summary: "The workspace's commits, newest first (§4.17)",
    description: `Empty when the workspace is not a git repository. \`limit\` default ${FILE_LIMITS.gitLogDefault}, at most ${FILE_LIMITS.gitLogMax} (a larger one is capped).${GIT_AS_AGENT}`,
    querystring: z.object({
      ...agentQuery,
      // §4.17 "cap 100": a larger limit is served at 100, not refused
      limit: z.coerce
        .number()
        .int()
        .min(1)
        .transform((n) => Math.min(n, FILE_LIMITS.gitLogMax))
        .default(FILE_LIMITS.gitLogDefault)
        .describe(`default ${FILE_LIMITS.gitLogDefault}, at most ${FILE_LIMITS.gitLogMax} (larger values are capped)`),
    }),
    response: {
      200: z.object({
        ok: z.literal(true),
        commits: z.array(z.object({ hash: z.string(), shortHash: z.string(), subject: z.string(), author: z.string(), date: z.string() })),
      }),
    },
  },
} as const;
