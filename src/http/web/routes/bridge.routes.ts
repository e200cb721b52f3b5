/** §4.13 bridge message bus (header `x-bridge-secret`). */

import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import {
  BRIDGE_CHANNELS,
  BRIDGE_OPERATOR_IDENTITY,
  BRIDGE_PRIORITIES,
  BRIDGE_SENDERS,
  type BridgeService,
} from '../../../domains/bridge/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, jsonBody } from '../../shared/schemas.ts';

const list = (values: readonly string[]) => values.map((v) => `\`${v}\``).join(', ');
const AUTH_TEXT =
  'Requires header `x-bridge-secret` equal to BRIDGE_SECRET (constant-time comparison; 401 `{error:"unauthorized"}`); ' +
  'when BRIDGE_SECRET is unset the bridge is closed: 503 `{error:"Bridge not configured"}` (the specification leaves it open; see docs/security.md).';

const message = z.object({
  id: z.string(),
  sender: z.string(),
  channel: z.string(),
  content: z.string(),
  priority: z.string(),
  created_at: z.string(),
});

/** Mounted in the bridge scope: its hook checks `x-bridge-secret` before the body is parsed or validated. */
export const bridgeRoutes = ({ bridge }: { bridge: BridgeService }): RouteModule<'bridge'> => ({
  prefix: '/api/bridge',
  bridge: async (app) => {
    app.post('/send', {
      schema: {
        tags: ['bridge'],
        summary: 'Post a message to the bridge',
        description:
          `${AUTH_TEXT} \`sender\` one of ${list(BRIDGE_SENDERS)} (\`${BRIDGE_OPERATOR_IDENTITY}\` is the operator identity); ` +
          `\`content\` 1 to ${LIMITS.bridgeContentMax} characters; \`channel\` one of ${list(BRIDGE_CHANNELS)} (default \`general\`); ` +
          `\`priority\` one of ${list(BRIDGE_PRIORITIES)} (default \`normal\`; the set is our choice, the specification names only the default). ` +
          '400 `sender and content are required`, `invalid sender`, `invalid channel`, `invalid priority`.',
        body: jsonBody({
          sender: z
            .unknown()
            .optional()
            .describe(`string: ${BRIDGE_SENDERS.join(' | ')}`),
          content: z.unknown().optional().describe('string'),
          channel: z
            .unknown()
            .optional()
            .describe(`string: ${BRIDGE_CHANNELS.join(' | ')}`),
          priority: z
            .unknown()
            .optional()
            .describe(`string: ${BRIDGE_PRIORITIES.join(' | ')}`),
        }),
        response: { 200: z.object({ ok: z.literal(true), message: message.omit({ content: true }) }), ...errorResponses(400, 401, 503) },
      },
      handler: async (request) => ({ ok: true as const, message: await bridge.send(request.body) }),
    });

    app.get('/inbox', {
      schema: {
        tags: ['bridge'],
        summary: 'Read unread bridge messages',
        description:
          `${AUTH_TEXT} Query: \`channel\` (default \`general\`), \`since\` (ISO 8601 or epoch milliseconds; default the last 24 hours), ` +
          `\`reader\` (at most ${LIMITS.bridgeReaderMax} characters; default \`unknown\`), \`limit\` (default ${LIMITS.bridgeInboxDefaultLimit}, ` +
          `larger values are capped at ${LIMITS.bridgeInboxMaxLimit}). Oldest first. Messages this reader has already read are left out and the ` +
          'returned ones are marked read for it, unless the reader is `unknown` (a peek). Each message reaches a reader once even when ' +
          'calls race; a call that loses a race may return fewer than `limit` messages, and the next call returns the rest.',
        querystring: z.object({
          channel: z.unknown().optional().describe(BRIDGE_CHANNELS.join(' | ')),
          since: z.unknown().optional().describe('ISO 8601 timestamp or epoch milliseconds'),
          reader: z.unknown().optional().describe('reader name'),
          limit: z.unknown().optional().describe(`1 to ${LIMITS.bridgeInboxMaxLimit}`),
        }),
        response: {
          200: z.object({ ok: z.literal(true), channel: z.string(), count: z.number(), messages: z.array(message) }),
          ...errorResponses(400, 401, 503),
        },
      },
      handler: async (request) => bridge.inbox(request.query),
    });

    app.get('/health', {
      schema: {
        tags: ['bridge'],
        summary: 'Bridge statistics',
        description:
          `${AUTH_TEXT} \`total_messages\` over all channels; \`last_message\` the newest one or null; \`channels\` and \`senders\` ` +
          'are the accepted channel names and sender identities. 500 `{status:"error", error}` when the store cannot be read.',
        response: {
          200: z.object({
            status: z.literal('ok'),
            total_messages: z.number(),
            last_message: z.object({ created_at: z.string(), sender: z.string(), channel: z.string() }).nullable(),
            channels: z.array(z.string()),
            senders: z.array(z.string()),
            timestamp: z.string(),
          }),
          500: z.object({ status: z.literal('error'), error: z.string() }),
          ...errorResponses(401, 503),
        },
      },
      handler: async (request, reply) => {
        try {
          return await bridge.health();
        } catch (err) {
          request.log.error({ err }, 'bridge health failed');
          return reply.code(500).send({ status: 'error' as const, error: 'Bridge store unavailable' });
        }
      },
    });
  },
});
