/**
 * An agent's messaging channels (docs/channels.md): connect a Telegram or Discord bot, its allow
 * list and pairing, on the owner's session; §4.18 provisioning with channel tokens (the agents
 * domain's provisioning, which takes tokens inside `config.channels`: this route only moves them
 * there); and the public address Telegram posts updates to when the platform receives them by webhook.
 */
import { z } from 'zod';
import { type AgentsWebService, provisionBody, provisioned } from '../../../domains/agents/index.ts';
import {
  approvedPairing,
  type Channels,
  channel,
  channelBody,
  channelList,
  channelParams,
  pairingParams,
} from '../../../domains/channels/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const errors = { ...errorResponses(400, 401, 404) };
const OWNER = "Owner only: another user's agent is 404 like a missing one.";
const SECRETS =
  'The token is checked with the provider (Telegram `getMe`, Discord `GET /users/@me`) before anything is stored, sealed at rest ' +
  '(AES-256-GCM), held by the platform only (the bot runs in the platform, not in the agent, so a token never enters the ' +
  "agent's sandbox, environment or process list) and never answered or logged: answers show its last 4 characters and the bot's @name.";

/** §4.18 `POST /api/provision`: the body of POST /api/agents/provision with channel tokens beside it (docs/channels.md "API") */
const channelTokens = z
  .object(
    {
      botToken: z.string({ error: 'botToken must be a string' }).trim().min(1, { error: 'botToken must not be empty' }).max(500),
      allowFrom: z.array(z.string().max(100), { error: 'allowFrom must be a list of user ids or @names' }).max(500).optional(),
      enabled: z.boolean({ error: 'enabled must be true or false' }).optional(),
    },
    { error: 'each channel must be an object with botToken' },
  )
  .strict();

const provisionWithChannels = provisionBody.extend({
  channels: z
    .object({ telegram: channelTokens.optional(), discord: channelTokens.optional() }, { error: 'channels must be an object' })
    .strict()
    .optional()
    .describe('Bot tokens for the platform-run channels: `telegram` (a BotFather token) and `discord` (a bot token)'),
});

export const channelsRoutes = (deps: { channels: Channels; agents: AgentsWebService }): RouteModule<'public' | 'session'> => {
  const { channels } = deps;

  return {
    prefix: '/api',
    public: async (app) => {
      app.post('/channels/telegram/:path', {
        schema: {
          tags: ['channels'],
          summary: 'Telegram webhook (Telegram posts here)',
          description:
            'Where Telegram posts updates for a bot when PUBLIC_URL is https and this process runs both apps (otherwise bots long-poll). ' +
            'The path and the `X-Telegram-Bot-Api-Secret-Token` header are derived from the bot token (SHA-256), so each agent has its own ' +
            'unguessable address; anything else is 404.',
          params: z.object({ path: z.string().min(1).max(128) }),
          body: z.record(z.string(), z.unknown()),
          response: { 200: z.object({ ok: z.literal(true) }), 404: errorSchema },
        },
        handler: async (request) => {
          const secret = request.headers['x-telegram-bot-api-secret-token'];
          return channels.telegramUpdate(request.params.path, typeof secret === 'string' ? secret : undefined, request.body);
        },
      });
    },
    session: async (app) => {
      app.get('/agents/:id/channels', {
        schema: {
          tags: ['channels'],
          summary: "The agent's messaging channels, recent senders and pairing codes",
          description:
            "Each channel with its bot, status (`connecting`, `connected`, `error` with the reason, `disabled`), allow list and the token's " +
            'last 4 characters (never the token); the 50 most recent senders (allowed or not); and the pairing codes waiting for approval ' +
            `(each lives an hour). ${OWNER}`,
          params: z.object({ id: z.string().min(1).max(64) }),
          response: { 200: channelList, ...errors },
        },
        handler: async (request) => channels.list(currentUser(request).id, request.params.id),
      });

      app.put('/agents/:id/channels/:kind', {
        schema: {
          tags: ['channels'],
          summary: 'Connect a Telegram or Discord bot to the agent, or change its settings',
          description:
            'With `botToken`: connects the bot (or replaces its token). Without: changes `allowFrom` or `enabled` of a connected channel ' +
            `(400 if there is none). ${SECRETS} 400 \`CHANNEL_TOKEN_REFUSED\` with the provider's reason when it refuses the token, 502 ` +
            '`CHANNEL_PROVIDER_UNREACHABLE` when it cannot be asked, 503 when the kind is not available on this platform. The platform ' +
            'connects the bot within seconds (long polling for Telegram, or a webhook when PUBLIC_URL is https) and answers its messages: ' +
            '§2 `allowFrom` (user ids or @names; empty allows everyone) is checked before the model is called; a sender not on the list gets a ' +
            'pairing code to give the owner; each sender has a session of their own (§2 per-channel-peer) with the reset words of ' +
            "`session.resetTriggers` (default `/new`, `/reset`); long replies are split at the provider's limit (docs/channels.md). " +
            OWNER,
          params: channelParams,
          body: channelBody,
          response: { 200: channel, ...errors, ...errorResponses(502, 503) },
        },
        handler: async (request) => channels.put(currentUser(request).id, request.params.id, request.params.kind, request.body),
      });

      app.delete('/agents/:id/channels/:kind', {
        schema: {
          tags: ['channels'],
          summary: 'Disconnect a channel',
          description: `Stops the bot and forgets its token, senders and pairing codes; 404 when the agent has no such channel. ${OWNER}`,
          params: channelParams,
          response: { 200: z.object({ success: z.literal(true) }), ...errors },
        },
        handler: async (request) => channels.remove(currentUser(request).id, request.params.id, request.params.kind),
      });

      app.post('/provision', {
        schema: {
          tags: ['agents'],
          summary: 'Provision an agent with its messaging channels (§4.18)',
          description:
            'POST /api/agents/provision (same body, rules and answers) with `channels: {telegram?, discord?}`, each `{botToken, allowFrom?, enabled?}`. ' +
            'Each token is checked with its provider first (Telegram `getMe`, Discord `GET /users/@me`): a refused one is 400 `CHANNEL_TOKEN_REFUSED` ' +
            "with the provider's reason and no agent is made. The tokens become the agent's channels (GET /api/agents/{id}/channels lists them without " +
            "the tokens), sealed at rest, and never enter the agent's configuration, environment or sandbox (docs/channels.md).",
          body: provisionWithChannels,
          response: { 201: provisioned, ...errorResponses(400, 401, 402, 429, 500, 502, 503) },
        },
        handler: async (request, reply) => {
          const { channels, config, name, model, tier, gitInit } = request.body;
          const given = channels ?? {};
          const inConfig = (config?.channels ?? {}) as Record<string, Record<string, unknown>>;
          const merged: Record<string, unknown> = { ...inConfig };
          for (const kind of ['telegram', 'discord'] as const) {
            const c = given[kind];
            if (c)
              merged[kind] = {
                ...inConfig[kind],
                ...(c.allowFrom ? { allowFrom: c.allowFrom } : {}),
                ...(c.enabled === undefined ? {} : { enabled: c.enabled }),
                botToken: c.botToken,
              };
          }
          const withChannels = channels ? { ...config, channels: merged } : config;
          return reply
            .code(201)
            .send(await deps.agents.provision(currentUser(request), { name, model, config: withChannels, tier, gitInit }));
        },
      });

      app.post('/agents/:id/channels/:kind/pairings/:code', {
        schema: {
          tags: ['channels'],
          summary: 'Approve a pairing code',
          description:
            "A sender not on the allow list who writes to the bot directly gets a pairing code (OpenClaw's `pairing`); approving it adds the " +
            `sender's id to \`allowFrom\`. 404 for a code that does not exist or has expired (after an hour). ${OWNER}`,
          params: pairingParams,
          response: { 200: approvedPairing, ...errors },
        },
        handler: async (request) => channels.approve(currentUser(request).id, request.params.id, request.params.kind, request.params.code),
      });
    },
  };
};
