/**
 * GET /api/agents/:id/watchdog (session, owner; designed: §3 "Watchdog lifecycle" gives the states,
 * not an endpoint): the owner's view of the agent's watchdog state and history, read under the
 * user's row-level security.
 */

import { z } from 'zod';
import { type WatchdogService, watchdogHistoryLimit, watchdogViewSchema } from '../../../domains/watchdog/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

export const webWatchdogRoutes = (deps: { watchdog: WatchdogService }): RouteModule<'session'> => {
  return {
    prefix: '/api/agents',
    session: async (app) => {
      app.get('/:id/watchdog', {
        schema: {
          tags: ['agents'],
          summary: "Your agent's watchdog state and history",
          description:
            'The state (§3: starting, running, degraded, repairing, crash_loop, stopped) and the newest `limit` (default 50, max 100) history rows: transitions, ' +
            'crashes and repair attempts with their outcome. `state` is null while the agent has never been watched. 401 without a session, 404 for an agent that is not yours.',
          params: z.object({ id: z.string().min(1).max(200) }),
          querystring: z.object({ limit: watchdogHistoryLimit }),
          response: { 200: watchdogViewSchema, ...errorResponses(400, 401, 404, 500) },
        },
        handler: async (request) => {
          const user = currentUser(request);
          return deps.watchdog.view(user.id, request.params.id, request.query.limit);
        },
      });
    },
  };
};
