/**
 * §4.7 web agent API (session cookie; the list also takes an `sk_` API key). Another user's agent answers 404 exactly as a missing one.
 * The logic is in src/domains/agents/agents.web.service.ts, the schemas in agents.web.schemas.ts.
 */

import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import {
  type AgentsWebService,
  agentMessagesPage,
  agentModels,
  agentName,
  agentStats,
  configObject,
  messagesQuery,
  provisionBody,
  provisioned,
  renamedAgent,
  type WebUser,
  webAgent,
  webAgentList,
  webLogsQuery,
} from '../../../domains/agents/index.ts';
import { logLine } from '../../../domains/logs/index.ts';
import { type WatchdogService, watchdogStateSchema } from '../../../domains/watchdog/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, jsonBody } from '../../shared/schemas.ts';
import { ACCOUNT_SECURITY } from '../../shared/security.ts';
import { type AccountRouteConfig, currentUser } from '../../shared/session.ts';

const idParam = z.object({ id: z.string().min(1).max(200) });
const errors = { ...errorResponses(400, 401, 404, 500) };

export const agentsRoutes = (deps: { agents: AgentsWebService; watchdog?: WatchdogService }): RouteModule<'session' | 'account'> => {
  const { agents } = deps;
  const me = async (request: FastifyRequest): Promise<WebUser> => currentUser(request);

  return {
    prefix: '/api/agents',
    // the list is what an SDK or script reads first (docs/agents.md "Connect with the openai SDK"): a key or the cookie
    account: async (app) => {
      app.get('', {
        schema: {
          tags: ['agents'],
          summary: "The caller's agents (session cookie or API key)",
          description:
            'With the session cookie, or `Authorization: Bearer sk_…` (one of your API keys): your agents, the same shape either way. ' +
            'Without either: `{agents:[],count:0,status:"ok"}` (not 401, §4.7). An invalid, deleted or expired key: 401 `Unauthorized`. ' +
            'A key limited to some agents (`agentIds`, POST /api/keys) lists only those; a key past its own rate limit is 429 ' +
            '`KEY_RATE_LIMITED` with `Retry-After`.',
          // the caller is optional here (§4.7): documented as "cookie, key, or nothing"
          security: [...ACCOUNT_SECURITY, {}],
          response: { 200: webAgentList, ...errorResponses(401, 429) },
        },
        config: { callerOptional: true } satisfies AccountRouteConfig,
        handler: async (request) => {
          const c = request.caller;
          return agents.list(c && { id: c.userId, email: c.email, isAdmin: c.isAdmin }, c?.key?.agentIds);
        },
      });
    },
    session: async (app) => {
      app.post('/provision', {
        schema: {
          tags: ['agents'],
          summary: 'Provision an agent',
          description:
            'Needs an active subscription (users.subscription_status `active`) unless the session email is an admin (ADMIN_EMAILS; the body `email` is never used): 402 `SUBSCRIPTION_REQUIRED`. ' +
            "Web limits by the user's plan read as a tier (solo→starter 1, collective→pro 3, label/network→enterprise 100; admins 100; unknown 1): over it 429 " +
            '`AGENT_LIMIT_REACHED` with `current`, `limit` and `plan`, for admins and everyone else alike, and a message that says the limit and how to raise it. ' +
            'The check and the insert happen under a lock on the user row, so parallel requests cannot pass the limit together. The agent is stored at once with status ' +
            '`provisioning`; the backend deployment is requested (POST {backend_url}/api/deployments, 15 s timeout) and the agent moves to `running` when it is healthy, or to ' +
            '`error` (a failed request answers 500 `Provisioning failed` with `agentId`). `tier` starter/pro/enterprise is forwarded as plan solo/collective/label (admins without ' +
            'a tier: network; otherwise the backend default label); over the backend limit for that plan the same 429 and no agent is kept. `model` is the one model the agent runs ' +
            '(docs/agents.md "Model"): `claude-opus-4-6` (the default), `gpt-4` and `custom` map to a catalog id by your plan, any other must be one of ' +
            '`GET /api/agents/models`; 400 `MODEL_CANNOT_RUN` with `models` otherwise. The answer names the id chosen. `claude-opus-4-6` (or none) ' +
            'records provider `anthropic` (§4.7); otherwise `config.aiProvider` or `router`. `gitInit` (ours, default false): the workspace starts as a git repository with a first commit ' +
            '(docs/agents.md "A repository from the start"); where git cannot run in the agent\'s sandbox, 503 `GIT_UNAVAILABLE` and no agent is kept. A backend refusal (400) keeps no agent either. ' +
            'Channel tokens (§4.18: `config.channels.telegram.botToken`, `config.channels.discord.token`) are checked with their provider first (400 `CHANNEL_TOKEN_REFUSED`), become the agent\'s platform channels and are taken out of its configuration (docs/channels.md "API").',
          body: provisionBody,
          response: { 201: provisioned, ...errors, ...errorResponses(402, 429, 503) },
        },
        handler: async (request, reply) => {
          const user = await me(request);
          const { name, model, config, tier, gitInit } = request.body;
          return reply.code(201).send(await agents.provision(user, { name, model, config, tier, gitInit }));
        },
      });

      app.get('/provision', {
        schema: {
          tags: ['agents'],
          summary: "The signed-in user's agents (provisioning view)",
          response: { 200: z.object({ success: z.literal(true), agents: z.array(webAgent), count: z.number() }), ...errors },
        },
        handler: async (request) => agents.provisionList(await me(request)),
      });

      app.get('/:id', {
        schema: {
          tags: ['agents'],
          summary: 'One agent',
          description: "`watchdog` (added): the agent's watchdog state (§3), see GET /api/agents/:id/watchdog for its history.",
          params: idParam,
          response: {
            200: z.object({ agent: webAgent.extend({ watchdog: watchdogStateSchema.optional() }), status: z.literal('ok') }),
            ...errors,
          },
        },
        handler: async (request) => {
          const user = await me(request);
          const r = await agents.get(user, request.params.id);
          return deps.watchdog ? { ...r, agent: { ...r.agent, watchdog: await deps.watchdog.stateOf(user.id, request.params.id) } } : r;
        },
      });

      app.patch('/:id', {
        schema: {
          tags: ['agents'],
          summary: 'Rename an agent',
          description: '`name` 1 to 64 characters after trim. The database is updated first; the backend sync is best effort.',
          params: idParam,
          body: jsonBody({ name: agentName }),
          response: { 200: renamedAgent, ...errors },
        },
        handler: async (request) => agents.rename(await me(request), request.params.id, request.body.name),
      });

      app.delete('/:id', {
        schema: {
          tags: ['agents'],
          summary: 'Delete an agent (added)',
          description: 'Owner only (404 otherwise). The backend removes the record and, best effort, the hosting unit.',
          params: idParam,
          response: { 200: z.object({ success: z.literal(true), id: z.string(), deleted: z.literal(true) }), ...errors },
        },
        handler: async (request) => agents.remove(await me(request), request.params.id),
      });

      app.get('/:id/config', {
        schema: {
          tags: ['agents'],
          summary: "The agent's configuration",
          description:
            'The stored configuration (§2 keys, with channel secrets masked), including the persona: `systemPrompt` and ' +
            '`agents.defaults.heartbeat.prompt` (docs/agents.md "Persona"). Owner only (404 otherwise).',
          params: idParam,
          response: { 200: z.object({ config: z.record(z.string(), z.unknown()), status: z.literal('ok') }), ...errors },
        },
        handler: async (request) => agents.getConfig(await me(request), request.params.id),
      });

      app.put('/:id/config', {
        schema: {
          tags: ['agents'],
          summary: "Replace the agent's configuration",
          description:
            'The body (a JSON object) replaces the configuration; it is forwarded to the backend, which stores it (masked channel ' +
            'secrets sent back keep the stored ones; a Telegram `botToken` or Discord `token` is checked with its provider and becomes the agent\'s platform channel instead, docs/channels.md). Persona keys (docs/agents.md "Persona"): `systemPrompt` (string of at most ' +
            `${LIMITS.agentSystemPromptMax} characters; null or empty: none), the first system message of every chat of the built-in ` +
            'runtime, and `agents.defaults.heartbeat.prompt` (at most ' +
            `${LIMITS.agentHeartbeatPromptMax} characters; null or empty: the default), what a heartbeat runs. 400 with \`error\` ` +
            "for a persona key that is not a string or too long, a configuration naming more skills than the agent's plan allows " +
            '(§2 skill limit: solo 3, collective 10, label 25, network 100; docs/agents.md "Skills"), a body that is not an object or cannot be stored. The agent reads ' +
            'its configuration when it is deployed: it applies from its next start (Stop, then Start; a Restart keeps the running launch).',
          params: idParam,
          body: configObject,
          response: { 200: z.object({ config: z.record(z.string(), z.unknown()), status: z.literal('updated') }), ...errors },
        },
        handler: async (request) => agents.putConfig(await me(request), request.params.id, request.body),
      });

      // docs/agents.md "Model": the ids the provisioning form and the Configuration tab offer
      const modelsDoc =
        'The models an agent of yours can run: allowed by your plan and served by a configured provider (§4.9 catalog ids). ' +
        "`default` is the id an agent provisioned without a model runs (§4.7's `claude-opus-4-6`, mapped by your plan), null when none can run.";
      const modelsReply = { 200: agentModels, ...errors };
      app.get('/models', {
        schema: { tags: ['agents'], summary: 'Models your agents can run', description: modelsDoc, response: modelsReply },
        handler: async (request) => agents.models(await me(request)),
      });
      app.get('/:id/models', {
        schema: {
          tags: ['agents'],
          summary: 'Models this agent can run',
          description: `${modelsDoc} Owner only (404 otherwise).`,
          params: idParam,
          response: modelsReply,
        },
        handler: async (request) => agents.models(await me(request), request.params.id),
      });

      app.get('/:id/logs', {
        schema: {
          tags: ['agents'],
          summary: "The agent runtime's recent log lines",
          description:
            'Real lines from the runtime, read from the hosting driver through the backend. `level` filters. 500 when the backend or hosting platform cannot be reached.',
          params: idParam,
          querystring: webLogsQuery,
          response: {
            200: z.object({
              logs: z.array(logLine),
              total: z.number(),
              limit: z.number(),
              status: z.literal('ok'),
            }),
            ...errors,
          },
        },
        handler: async (request) => agents.logs(await me(request), request.params.id, request.query),
      });

      app.get('/:id/messages', {
        schema: {
          tags: ['agents'],
          summary: 'Stored chat messages with the agent, newest first',
          description:
            'Every turn of every way in (dashboard and REST chat, the WebSocket, the OpenAI-compatible proxy streamed or not) in the order ' +
            'it was said: newest first by the order of storing, each question before its answer (reversed, the list is the conversation). ' +
            'A question\'s `timestamp` is when it was asked, an answer\'s when it was complete (docs/agents.md "Who stores turns"). `platform` labels the source ' +
            '(dashboard, api, websocket, telegram, discord); `session` keeps one conversation session (`dashboard`, `telegram:<peer>`: docs/channels.md "Sessions").',
          params: idParam,
          querystring: messagesQuery,
          response: { 200: agentMessagesPage, ...errors },
        },
        handler: async (request) => agents.messages(await me(request), request.params.id, request.query),
      });

      app.get('/:id/stats', {
        schema: {
          tags: ['agents'],
          summary: 'Live resource and message statistics',
          description:
            'Owner only. Resource figures are live from the hosting driver (through the backend); message figures come from stored messages and the runtime. ' +
            "When the backend cannot be reached, zeros for the resource figures and `status:'mock'`.",
          params: idParam,
          response: { 200: agentStats, ...errors },
        },
        handler: async (request) => agents.stats(await me(request), request.params.id),
      });
    },
  };
};
