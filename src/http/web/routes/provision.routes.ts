/**
 * §4.18 `POST /api/provision`: provisioning with channel tokens ("request and response not shown";
 * the design is ours, docs/channels.md "API"). The body is POST /api/agents/provision's (§4.7) with
 * `channels` beside it: each token is checked with its provider before anything is stored, becomes
 * one of the agent's platform channels, and never enters the agent's configuration or sandbox. The
 * logic is the agents domain's provisioning (agents.web.service.ts), which takes channel tokens
 * inside `config.channels`; this route only moves them there.
 */
import { z } from 'zod';
import { type AgentsWebService, provisionBody, provisioned } from '../../../domains/agents/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorSchema } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

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

const body = provisionBody.extend({
  channels: z
    .object({ telegram: channelTokens.optional(), discord: channelTokens.optional() }, { error: 'channels must be an object' })
    .strict()
    .optional()
    .describe('Bot tokens for the platform-run channels: `telegram` (a BotFather token) and `discord` (a bot token)'),
});

export const provisionRoutes = (deps: { agents: AgentsWebService }): RouteModule<'session'> => ({
  prefix: '/api',
  session: async (app) => {
    app.post('/provision', {
      schema: {
        tags: ['agents'],
        summary: 'Provision an agent with its messaging channels (§4.18)',
        description:
          'POST /api/agents/provision (same body, rules and answers) with `channels: {telegram?, discord?}`, each `{botToken, allowFrom?, enabled?}`. ' +
          'Each token is checked with its provider first (Telegram `getMe`, Discord `GET /users/@me`): a refused one is 400 `CHANNEL_TOKEN_REFUSED` ' +
          "with the provider's reason and no agent is made. The tokens become the agent's channels (GET /api/agents/{id}/channels lists them without " +
          "the tokens), sealed at rest, and never enter the agent's configuration, environment or sandbox (docs/channels.md).",
        body,
        response: {
          201: provisioned,
          400: errorSchema,
          401: errorSchema,
          402: errorSchema,
          429: errorSchema,
          500: errorSchema,
          502: errorSchema,
          503: errorSchema,
        },
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
  },
});
