/**
 * Backend agent API (§4.7 backend rows; §4.18 deployments, per-agent lifecycle and runtime
 * instances, whose shapes the specification leaves "not shown": designed here and documented in
 * OpenAPI). Registered inside the bearer-key scope (§5).
 *
 * Acting user: the backend is called by the web app on a user's behalf. The user is given in
 * header `x-user-id` (a user id, UUID_PATTERN) — or, on POST /api/agents and POST /api/deployments, as
 * `userId` in the body — and every user-row query runs under that user's row-level security, so
 * another user's agent is 404 exactly as a missing one. A call with the bearer key and no user
 * (§4.7 asks for K and nothing more) acts as the operator account (migration 040): it creates,
 * lists and deletes the operator's own agents and never sees a user's.
 * The logic is in src/domains/agents/, the schemas in src/domains/agents/agents.backend.schemas.ts.
 */

import { z } from 'zod';
import {
  type AgentsService,
  agentIdParam,
  agentListItem,
  agentRecord,
  createAgentBody,
  createdAgent,
  type DeploymentJobs,
  deploymentBody,
  deploymentJob,
  driverLogLine,
  driverLogsQuery,
  driverStats,
  instancesQuery,
  runtimeInstances,
  updateAgentBody,
  updatedAgent,
} from '../../../domains/agents/index.ts';
import { type WatchdogService, watchdogStateSchema } from '../../../domains/watchdog/index.ts';
import { UUID_PATTERN } from '../../../lib/ids.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { documentedHeaders, errorResponses, errorSchema } from '../../shared/schemas.ts';
import { actingUser, namesUser, OPERATOR_USER_ID } from '../acting-user.ts';

const userHeaderDoc =
  'Acting user: header `x-user-id` (user id). Without it the call acts as the built-in operator account ' +
  `(\`${OPERATOR_USER_ID}\`, no sign-in possible): agents created so belong to the operator, are listed only without \`x-user-id\` ` +
  "and are deleted only so; a user's agents are never reachable without naming the user.";
const headers = documentedHeaders({ 'x-user-id': 'Acting user (user id, UUID_PATTERN); absent: the operator account' });

const agentObject = agentRecord.extend({ watchdog: watchdogStateSchema.optional() });
const common = { ...errorResponses(400, 401, 403, 404, 500) };

export const backendAgentsRoutes = (deps: {
  agents: AgentsService;
  deployments: Pick<DeploymentJobs, 'requestDeployment' | 'getDeployment'>;
  watchdog?: WatchdogService;
}): RouteModule<'bearer'> => {
  const { agents, deployments } = deps;

  return {
    prefix: '/api',
    bearer: async (app) => {
      app.get('/agents', {
        schema: {
          tags: ['agents'],
          summary: "List the acting user's agents",
          description: `${userHeaderDoc} A flat array, newest first.`,
          headers,
          response: { 200: z.array(agentListItem), ...common },
        },
        handler: async (request) => agents.list(actingUser(request)),
      });

      app.post('/agents', {
        schema: {
          tags: ['agents'],
          summary: 'Create an agent record (status pending)',
          description:
            `${userHeaderDoc} Stores metadata only (§3: status \`pending\`); deploy it with POST /api/agents/:id/start or POST /api/deployments. ` +
            'Plan limits (`config.plan`, default `label`): solo 1, collective 3, label 10, network unlimited; over the limit 402 `AGENT_LIMIT_REACHED`.',
          headers,
          body: createAgentBody,
          response: { 201: createdAgent, 402: errorSchema, ...common },
        },
        handler: async (request, reply) => {
          const userId = actingUser(request, request.body.userId);
          const created = await agents.create(userId, {
            name: request.body.name,
            plan: request.body.config?.plan,
            aiProvider: request.body.config?.aiProvider,
          });
          return reply.code(201).send(created);
        },
      });

      app.get('/agents/:id', {
        schema: {
          tags: ['agents'],
          summary: 'One agent',
          description: `${userHeaderDoc} 404 when it is not the user's. \`watchdog\` (added): the watchdog state (§3); GET /api/agents/:id/watchdog has its history.`,
          headers,
          params: agentIdParam,
          response: { 200: agentObject, ...common },
        },
        handler: async (request) => {
          const userId = actingUser(request);
          const agent = await agents.get(userId, request.params.id);
          return deps.watchdog ? { ...agent, watchdog: await deps.watchdog.stateOf(userId, request.params.id) } : agent;
        },
      });

      app.put('/agents/:id', {
        schema: {
          tags: ['agents'],
          summary: 'Update plan, provider, configuration (and name, model)',
          description: `${userHeaderDoc} All fields optional. \`name\` and \`model\` are added (the web app's rename sync uses \`name\`).`,
          headers,
          params: agentIdParam,
          body: updateAgentBody,
          response: { 200: updatedAgent, ...common },
        },
        handler: async (request) => agents.update(actingUser(request), request.params.id, request.body),
      });

      app.delete('/agents/:id', {
        schema: {
          tags: ['agents'],
          summary: 'Delete an agent',
          description: `${userHeaderDoc} Removes the record, then cleans up on the hosting platform best effort. An unknown id (or another user's) still answers \`{id,deleted:true}\` and touches nothing.`,
          headers,
          params: agentIdParam,
          response: { 200: z.object({ id: z.string(), deleted: z.literal(true) }), ...common },
        },
        handler: async (request) =>
          agents.remove(actingUser(request), request.params.id, (err) =>
            request.log.warn({ err, agentId: request.params.id }, 'hosting cleanup failed'),
          ),
      });

      for (const action of ['start', 'stop', 'restart'] as const) {
        app.post(`/agents/:id/${action}`, {
          schema: {
            tags: ['agents'],
            summary: `${action[0]!.toUpperCase()}${action.slice(1)} an agent`,
            description:
              `${userHeaderDoc} Per-agent lifecycle (§4.18, designed; docs/agents.md "Stop, suspend and restart"). \`stop\` ends every process of the agent and revokes its platform key, answering once they are gone (status \`stopped\`). ` +
              '`restart` deploys it again from its stored record (a configuration saved since applies) and answers status `provisioning` with the deploy job; `start` does the same unless the agent already runs (then status `running`, no job). ' +
              'Concurrent calls on one agent run in arrival order. 500 `Hosting unavailable` when the hosting platform cannot be reached. No body.',
            headers,
            params: agentIdParam,
            response: {
              200: z.object({ id: z.string(), action: z.literal(action), status: z.string(), deployment: deploymentJob.nullable() }),
              ...common,
            },
          },
          handler: async (request) => agents.lifecycle(actingUser(request), request.params.id, action),
        });
      }

      app.get('/agents/:id/logs', {
        schema: {
          tags: ['agents'],
          summary: 'Recent runtime log lines from the hosting driver',
          description: `${userHeaderDoc} \`limit\` default 50, max 100; \`level\` filters (debug, info, warn, error). 500 when the hosting platform cannot be reached.`,
          headers,
          params: agentIdParam,
          querystring: driverLogsQuery,
          response: { 200: z.object({ logs: z.array(driverLogLine) }), ...common },
        },
        handler: async (request) => ({ logs: await agents.logs(actingUser(request), request.params.id, request.query) }),
      });

      app.get('/agents/:id/stats', {
        schema: {
          tags: ['agents'],
          summary: 'Live resource usage from the hosting driver',
          description: `${userHeaderDoc} 500 when the hosting platform cannot be reached.`,
          headers,
          params: agentIdParam,
          response: { 200: z.object({ stats: driverStats }), ...common },
        },
        handler: async (request) => ({ stats: await agents.stats(actingUser(request), request.params.id) }),
      });

      app.post('/deployments', {
        schema: {
          tags: ['deployments'],
          summary: 'Provision an agent (the web app calls this)',
          description:
            'Acting user: `userId` in the body (or header `x-user-id`; with neither, the operator account as on POST /api/agents). Creates the agent with status `provisioning` — or, when `agentId` names an agent the web app already ' +
            'created for this user, takes that one — and enqueues a deploy job. Concurrent requests for one agent join the same active job; an `agentId` of another user is 404 like a missing one. Jobs live in PostgreSQL and are taken by deployment workers with FOR UPDATE SKIP LOCKED ' +
            "(a crashed worker's job is taken again when its lease expires; one active job per agent). The job deploys with per-agent credentials, waits for `/healthz` " +
            '(poll every 2 s, 60 s overall) and moves the agent to `running`, or to `error` after 3 failed attempts. Poll GET /api/deployments/:id or GET /api/agents/:id. ' +
            'Answers 202 with the job. `plan` defaults to `label`; backend limits solo 1, collective 3, label 10, network unlimited (402 `AGENT_LIMIT_REACHED`), counted for `limitPlan` when given (the web app sends `network` for an admin, whose account plan is network whatever size the agent runs at), else for `plan`. ' +
            '500 `Hosting unavailable` (code `HOSTING_UNAVAILABLE`) when the hosting driver cannot be used. `gitInit` true (default false): once deployed, the workspace is made a git repository with a first ' +
            'commit before the agent reads `running` (docs/agents.md "A repository from the start"); 503 `GIT_UNAVAILABLE`, and nothing made, where git cannot run in the agent\'s sandbox.',
          headers,
          body: deploymentBody,
          response: { 202: z.object({ deployment: deploymentJob, agent: agentObject }), ...common, ...errorResponses(402, 503) },
        },
        handler: async (request, reply) => {
          const userId = actingUser(request, request.body.userId);
          const { userId: _ignored, ...input } = request.body;
          return reply.code(202).send(await deployments.requestDeployment({ ...input, userId }));
        },
      });

      app.get('/deployments/:id', {
        schema: {
          tags: ['deployments'],
          summary: 'One deployment job',
          description: `${userHeaderDoc} Status queued → running → succeeded | failed (queued again between retries).`,
          headers,
          params: z.object({ id: z.string().regex(UUID_PATTERN, { error: 'Invalid deployment id' }) }),
          response: { 200: deploymentJob, ...common },
        },
        handler: async (request) => deployments.getDeployment(actingUser(request), request.params.id),
      });

      app.get('/runtime-instances', {
        schema: {
          tags: ['agents'],
          summary: 'Runtime instances: agents and what the hosting driver reports for each',
          description:
            "With header `x-user-id`: that user's agents; without it: all agents (operator view, newest first). `containerStatus` is the §3 container health value " +
            '(null when the hosting platform cannot be asked). `limit` default 50, max 100.',
          headers,
          querystring: instancesQuery,
          response: { 200: runtimeInstances, ...common },
        },
        handler: async (request) => {
          const userId = namesUser(request) ? actingUser(request) : undefined;
          const instances = await agents.runtimeInstances({ userId, limit: request.query.limit });
          return { instances, count: instances.length };
        },
      });
    },
  };
};
