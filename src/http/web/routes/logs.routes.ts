/**
 * Live logs (§4.7 planned endpoints; docs/agents.md "Live logs"): Server-Sent Events of an
 * agent's new runtime log lines, its recent history, and control of the open streams. Owner only
 * (session); another user's agent is 404 like a missing one.
 */
import { z } from 'zod';
import type { AgentsWebService } from '../../../domains/agents/index.ts';
import { type LiveLogs, logLine } from '../../../domains/logs/index.ts';
import type { StreamRevoker } from '../../../lib/eviction-bus.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema } from '../../shared/schemas.ts';
import { currentUser, type SessionAuth } from '../../shared/session.ts';
import { startEventStream } from '../../shared/sse.ts';

const params = z.object({ agentId: z.string().min(1).max(64) });
const errors = { ...errorResponses(401, 404, 500) };
/** a comment line now and then keeps proxies from closing a quiet stream */
const KEEPALIVE_MS = 15_000;

/** `end` reason of a stream whose session was signed out or revoked (docs/security.md N12). */
const REVOKED = 'Credentials revoked';

export const logsRoutes = (deps: {
  agents: AgentsWebService;
  live: LiveLogs;
  session: SessionAuth;
  /** ends the streams of a session that is signed out or revoked */
  revoker: StreamRevoker;
}): RouteModule<'session'> => {
  const { agents, live } = deps;

  return {
    prefix: '/api',
    session: async (app) => {
      app.get('/logs/:agentId/stream', {
        schema: {
          tags: ['logs'],
          summary: 'Live runtime log lines of one of your agents (Server-Sent Events)',
          description:
            'A `text/event-stream` of the lines the agent writes from now on: `event: log` with a log line (the shape of ' +
            '`GET /api/agents/{id}/logs`), a `: keep-alive` comment every 15 s, and `event: end` `{reason}` when the stream is ' +
            `stopped (\`POST /api/logs/{agentId}/stop\`), the agent disappears, or the session is signed out or revoked (\`${REVOKED}\`). ` +
            'Lines are read from the hosting driver about once a second, by one reader per agent however many streams are open; closing the connection releases the stream.',
          params,
          response: { 200: z.string().describe('text/event-stream'), ...errors },
        },
        handler: async (request, reply) => {
          const user = currentUser(request);
          const { agentId } = request.params;
          // from the moment the session was checked: a sign-out meanwhile ends the stream at once
          const watch = deps.revoker.watch(user.id, { session: deps.session.token(request) ?? '' });
          try {
            // 404 before the stream starts, for another user's agent or an unknown one
            await agents.get(user, agentId);
          } catch (err) {
            watch.release();
            throw err;
          }
          const res = startEventStream(request, reply);
          res.write(': connected\n\n');
          let release = () => {};
          const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), KEEPALIVE_MS);
          keepAlive.unref();
          const finish = () => {
            clearInterval(keepAlive);
            release();
            watch.release();
          };
          const end = (reason: string) => {
            finish();
            if (!res.writableEnded) res.end(`event: end\ndata: ${JSON.stringify({ reason })}\n\n`);
          };
          release = live.subscribe(user.id, agentId, {
            onLine: (l) => res.write(`event: log\ndata: ${JSON.stringify(l)}\n\n`),
            onEnd: end,
          });
          watch.onRevoked(() => end(REVOKED));
          request.raw.once('close', finish);
          res.once('close', finish);
          // the client may have left while the agent was looked up: its 'close' is behind us
          if (res.destroyed) finish();
        },
      });

      app.get('/logs/:agentId/history', {
        schema: {
          tags: ['logs'],
          summary: 'Recent runtime log lines of one of your agents',
          description:
            'The same lines as `GET /api/agents/{id}/logs`, under the live-log paths: newest `limit` (default 100, at most 100), oldest first; `level` filters.',
          params,
          querystring: z.object({
            limit: z.coerce.number().int().min(1).max(100).default(100),
            level: z.enum(['debug', 'info', 'warn', 'error'], { error: 'level must be debug, info, warn or error' }).optional(),
          }),
          response: {
            200: z.object({ logs: z.array(logLine), total: z.number(), limit: z.number(), status: z.literal('ok') }),
            400: errorSchema,
            ...errors,
          },
        },
        handler: async (request) => agents.logs(currentUser(request), request.params.agentId, request.query),
      });

      app.post('/logs/:agentId/stop', {
        schema: {
          tags: ['logs'],
          summary: 'Ends your open live-log streams of one agent',
          description: 'Every stream you have open on this agent receives `event: end` and is closed. `stopped` counts them (0 when none).',
          params,
          response: { 200: z.object({ agentId: z.string(), stopped: z.number() }), ...errors },
        },
        handler: async (request) => {
          const user = currentUser(request);
          await agents.get(user, request.params.agentId);
          return { agentId: request.params.agentId, stopped: live.stop(user.id, request.params.agentId) };
        },
      });

      app.get('/logs/:agentId/active', {
        schema: {
          tags: ['logs'],
          summary: 'Whether you have live-log streams open on one agent',
          description: 'Counts the streams open in the web process that answers (with several replicas, each counts its own).',
          params,
          response: { 200: z.object({ agentId: z.string(), active: z.boolean(), streams: z.number() }), ...errors },
        },
        handler: async (request) => {
          const user = currentUser(request);
          await agents.get(user, request.params.agentId);
          const streams = live.active(user.id, request.params.agentId);
          return { agentId: request.params.agentId, active: streams > 0, streams };
        },
      });
    },
  };
};
