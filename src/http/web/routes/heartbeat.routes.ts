/** §4.12 per-agent heartbeat settings (session). */

import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import type { HeartbeatService } from '../../../domains/heartbeat/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, jsonBody } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

// agentId and frequency are checked by the service so a missing or mistyped value answers with
// the specification's exact text (`agentId required`) rather than a generic validation message.
const agentId = z.unknown().describe(`string, required (1 to ${LIMITS.heartbeatAgentIdMax} characters)`);
const FREQUENCY_TEXT = '`<n>m`, `<n>h` or `<n>d`, n a positive whole number, at most 30 days (e.g. `30m`, `3h`, `1d`)';

const heartbeat = z.object({
  frequency: z.string(),
  enabled: z.boolean(),
  lastHeartbeat: z.string().nullable(),
  nextHeartbeat: z.string().nullable(),
});

export const heartbeatRoutes = (deps: { heartbeat: HeartbeatService }): RouteModule<'session'> => {
  const { heartbeat: service } = deps;

  return {
    prefix: '/api/heartbeat',
    session: async (app) => {
      app.get('', {
        schema: {
          tags: ['heartbeat'],
          summary: "An agent's heartbeat settings",
          description:
            "The caller's saved settings for `agentId`, or the defaults (`3h`, enabled, null times) when none are saved. " +
            "Settings are per user, so this never reveals another user's settings.",
          querystring: z.object({ agentId: agentId.optional() }),
          response: { 200: z.object({ heartbeat }), ...errorResponses(400, 401) },
        },
        handler: async (request) => {
          const user = currentUser(request);
          return { heartbeat: await service.get(user.id, request.query.agentId) };
        },
      });

      app.post('', {
        schema: {
          tags: ['heartbeat'],
          summary: "Save an agent's heartbeat settings",
          description:
            `\`agentId\` required; \`frequency\` ${FREQUENCY_TEXT}, default \`3h\`; \`enabled\` default true (the defaults apply to an omitted ` +
            "field on every save, as §4.12 states). The agent must be one of the caller's agents or the caller's runtime instance id " +
            '(404 `Agent not found` otherwise). `lastHeartbeat` is the save time and `nextHeartbeat` the save time plus the frequency ' +
            '(also when disabled). Response `{success:true, heartbeat:{agentId,frequency,enabled,lastHeartbeat,nextHeartbeat,lastUpdated}}`.',
          body: jsonBody({
            agentId: agentId.optional(),
            frequency: z.unknown().optional().describe(`string: ${FREQUENCY_TEXT}`),
            enabled: z.boolean({ error: 'Enabled must be a boolean' }).optional(),
          }),
          response: {
            200: z.object({
              success: z.literal(true),
              heartbeat: heartbeat.extend({ agentId: z.string(), lastUpdated: z.string() }),
            }),
            ...errorResponses(400, 401, 404),
          },
        },
        handler: async (request) => {
          const user = currentUser(request);
          return { success: true as const, heartbeat: await service.save(user.id, request.body) };
        },
      });

      app.delete('', {
        schema: {
          tags: ['heartbeat'],
          summary: "Delete an agent's heartbeat settings",
          description:
            "`agentId` in the JSON body or the query string. Removes the caller's saved settings for that agent (the defaults apply " +
            'again); `{success:true}` also when none were saved.',
          querystring: z.object({ agentId: agentId.optional() }),
          // a DELETE usually has no body (Fastify gives null): then the query string is used
          body: jsonBody({ agentId: agentId.optional() }).nullish(),
          response: { 200: z.object({ success: z.literal(true) }), ...errorResponses(400, 401) },
        },
        handler: async (request) => {
          const user = currentUser(request);
          await service.remove(user.id, request.body?.agentId ?? request.query.agentId);
          return { success: true as const };
        },
      });
    },
  };
};
