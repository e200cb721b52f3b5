/** §4.2 agent configuration with versioned backups (session). */

import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import { type ConfigService, INITIAL_BACKUP_ID } from '../../../domains/agent-config/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema, jsonBody } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const configObject = z.record(z.string(), z.unknown()).describe('The agent configuration: any JSON object (§2 default shape)');
const backups = z
  .array(z.object({ id: z.string(), timestamp: z.string() }))
  .describe(
    `Backups, newest first; at most ${LIMITS.configBackupsKept}. Ids are \`bkp_<epoch_ms>\` (the first is \`${INITIAL_BACKUP_ID}\`)`,
  );

const saveBody = jsonBody({
  config: z.record(z.string(), z.unknown(), {
    error: (issue) => (issue.input === undefined ? 'Config is required' : 'Config must be a JSON object'),
  }),
});
const restoreBody = jsonBody({
  backupId: z
    .string({ error: (issue) => (issue.input === undefined ? 'Missing backupId' : 'Invalid backupId: must be a string') })
    .min(1, { error: 'Missing backupId' })
    .max(200, { error: 'Invalid backupId: too long' }),
});

export const configRoutes = (deps: { config: ConfigService }): RouteModule<'session'> => {
  const actor = (request: FastifyRequest) => {
    const u = currentUser(request);
    return { id: u.id, isAdmin: u.isAdmin };
  };

  return {
    prefix: '/api/config',
    session: async (app) => {
      app.get('', {
        schema: {
          tags: ['config'],
          summary: 'The agent configuration and its backups',
          description:
            "The saved configuration, or the default one when none is saved. The default follows §2 and the user's plan: " +
            '`tools.profile` is `coding` for collective, label and network (and admins), `messaging` for solo. Its channel keys (left ' +
            "neutral in the specification) are the runtime's: `channels.whatsapp.allowFrom` (empty allows all senders), " +
            '`channels.telegram.enabled` and `channels.discord.enabled` (false), `channels.webchat.enabled` (true); the default model is ' +
            '`anthropic/claude-opus-4-6`, the workspace `/home/node/workspace`, the reset triggers `/new` and `/reset`. ' +
            'Backups list only id and timestamp, newest first.',
          response: { 200: z.object({ config: configObject, backups }), 401: errorSchema },
        },
        handler: async (request) => deps.config.get(actor(request)),
      });

      app.post('', {
        schema: {
          tags: ['config'],
          summary: 'Save the agent configuration',
          description:
            'Backs up the configuration being replaced (the first save backs up the default as `bkp_initial`), then saves `config`. ' +
            `At most ${LIMITS.configBackupsKept} backups are kept; the oldest are dropped. Saves of one user are applied one at a time ` +
            '(a per-user lock), so concurrent saves never keep more backups or lose the newest. Backup ids are `bkp_<epoch_ms>`, unique ' +
            'even within one millisecond (the next free millisecond is used). `backupId` is the id of the backup this save made. ' +
            `400 when config is missing or not a JSON object, when it cannot be stored (NUL characters, unpaired surrogates, nesting ` +
            `deeper than ${LIMITS.configMaxDepth}), or when the body is not valid JSON.`,
          body: saveBody,
          response: {
            200: z.object({ success: z.literal(true), config: configObject, backupId: z.string(), backups }),
            ...errorResponses(400, 401),
          },
        },
        handler: async (request) => deps.config.save(actor(request), request.body.config),
      });

      app.put('', {
        schema: {
          tags: ['config'],
          summary: 'Restore a configuration backup',
          description:
            'Backs up the current configuration (like a save), then makes backup `backupId` the configuration. `restoredFrom` is the ' +
            "restored backup's id; `backupId` (added) the id of the backup of the replaced configuration. The restored backup stays in " +
            'the list unless it was the oldest and the new backup pushed it past the limit. 404 `Backup not found` for an unknown id ' +
            '(nothing changes then).',
          body: restoreBody,
          response: {
            200: z.object({ success: z.literal(true), config: configObject, restoredFrom: z.string(), backupId: z.string(), backups }),
            ...errorResponses(400, 401, 404),
          },
        },
        handler: async (request) => deps.config.restore(actor(request), request.body.backupId),
      });
    },
  };
};
