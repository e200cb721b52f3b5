/**
 * §4.17 file explorer, per agent: the acting user's agent (404 otherwise, row-level security
 * decides), its workspace from the hosting driver, then workspace-files.service.ts does the work. One
 * service for both callers: the backend's key with `x-user-id`, and the web app's session for the
 * owner (docs/agents.md "File explorer").
 */
import type { Db } from '../../db/client.ts';
import { AppError, badRequest } from '../../lib/errors.ts';
import { findOwnAgent, type HostingDriver } from '../agents/index.ts';
import { createWorkspaceFiles, type WorkspaceFiles } from './workspace-files.service.ts';

export function createFilesService(deps: { db: Db; driver: HostingDriver | undefined }) {
  return {
    async forAgent(userId: string, agentId: string | undefined): Promise<WorkspaceFiles> {
      if (!agentId) throw badRequest('agentId required');
      await findOwnAgent(deps.db, userId, agentId);
      const workspace = deps.driver?.workspace?.(agentId);
      if (!workspace) {
        throw new AppError(
          'NO_LOCAL_WORKSPACE',
          "This agent's workspace is not on this machine: the file explorer needs the local hosting driver",
        );
      }
      return createWorkspaceFiles(workspace);
    },

    /**
     * Provisioning's `gitInit` (docs/agents.md "A repository from the start"), for the deployment
     * job that has just deployed the agent: the same git-init as the Files tab's, as the agent in
     * its sandbox, then a first commit by the platform. `available` says whether this driver can
     * (a workspace on this machine and a sandbox to run git in), so a request that cannot be
     * honoured is refused before any agent is made.
     */
    repositories: {
      available: (agentId: string) => Boolean(deps.driver?.workspace?.(agentId).run),
      async initialise(agentId: string) {
        const workspace = deps.driver?.workspace?.(agentId);
        if (!workspace?.run) throw new AppError('GIT_UNAVAILABLE', "This agent's workspace cannot run git in a sandbox here");
        await createWorkspaceFiles(workspace).gitInit({ initialCommit: INITIAL_COMMIT_MESSAGE });
      },
    },
  };
}

/** The message of the first commit of a workspace provisioned as a repository. */
export const INITIAL_COMMIT_MESSAGE = 'Initial commit: the workspace as provisioned';

export type FilesService = ReturnType<typeof createFilesService>;
