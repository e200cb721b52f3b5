/**
 * Agent lifecycle on the web (§4.18 "/api/instance/:userId/{action}": actions and payloads not
 * shown; designed here). POST with an optional JSON body `{agentId}`. The session user must be
 * :userId — another user's id answers 404, as if it did not exist. Without `agentId` the action
 * applies to every agent of the user. Each action goes to the backend's per-agent lifecycle
 * route: `stop` ends the agent's processes, `start` and `restart` deploy it again from its stored
 * configuration (`start` only when it does not run).
 */

import { z } from 'zod';
import type { AgentsWebService } from '../../../domains/agents/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

export const instanceRoutes = (deps: { agents: AgentsWebService }): RouteModule<'session'> => {
  return {
    prefix: '/api/instance',
    session: async (app) => {
      for (const action of ['start', 'stop', 'restart'] as const) {
        app.post(`/:userId/${action}`, {
          schema: {
            tags: ['agents'],
            summary: `${action[0]!.toUpperCase()}${action.slice(1)} the user's agents`,
            description:
              'The session user must be `:userId` (404 otherwise). Optional body `{agentId}` limits the action to one agent; without it every agent of the user is acted on. ' +
              '`stop` ends every process of the agent (status `stopped`, once they are gone); `restart` deploys it again from its saved configuration (status `provisioning` until it answers again), and `start` does the same unless it already runs (status `running`). ' +
              '500 when the backend or hosting platform cannot be reached.',
            params: z.object({ userId: z.string().min(1).max(200) }),
            body: z
              .object(
                { agentId: z.string({ error: 'agentId must be a string' }).min(1).max(200).optional() },
                { error: 'Request body must be a JSON object' },
              )
              .nullish(),
            response: {
              200: z.object({
                success: z.literal(true),
                action: z.literal(action),
                userId: z.string(),
                agents: z.array(z.object({ id: z.string(), status: z.string() })),
              }),
              ...errorResponses(400, 401, 404, 500),
            },
          },
          handler: async (request) => {
            const user = currentUser(request);
            return deps.agents.instanceAction(user, request.params.userId, action, request.body?.agentId);
          },
        });
      }
    },
  };
};
