/**
 * The backend's `agentKey` scope (./routes.ts): routes an agent calls back on with its own
 * platform key (`Authorization: Bearer apk_…`, issued per agent at deploy time), never
 * INTERNAL_API_KEY, which agents do not receive. The hook resolves the key to its agent before
 * the body is read (an unauthenticated caller learns nothing from validation) and sets
 * `request.agentCaller`; a missing, malformed, unknown or revoked key is 401 `Unauthorized`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { AgentCaller } from '../../domains/agents/index.ts';
import { unauthorized } from '../../lib/errors.ts';
import { documented } from './openapi.ts';
import { AGENT_KEY_SECURITY } from './security.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The calling agent in the backend's agentKey scope; null elsewhere. Read it with `callingAgent`. */
    agentCaller: AgentCaller | null;
  }
}

/**
 * Decorates `request.agentCaller` and returns the agentKey scope's hook. `verify` answers at once
 * where it can (a cached key) and with a promise where it reads: the hook is a callback hook, so
 * the AI gateway's calls with a cached key pass it without a promise (docs/benchmarks.md "AI proxy").
 */
export function registerAgentKeyAuth(
  app: FastifyInstance<any, any, any, any, any>,
  verify: (key: string) => AgentCaller | null | Promise<AgentCaller | null>,
) {
  app.decorateRequest('agentCaller', null);
  const accept = (request: FastifyRequest, caller: AgentCaller | null): Error | undefined => {
    if (!caller) return unauthorized('Unauthorized');
    request.agentCaller = caller;
    return undefined;
  };
  return documented(
    function requireAgentKey(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
      const header = request.headers.authorization;
      if (typeof header !== 'string' || !header.startsWith('Bearer ')) {
        done(unauthorized('Unauthorized'));
        return;
      }
      const caller = verify(header.slice('Bearer '.length).trim());
      if (caller instanceof Promise) caller.then((c) => done(accept(request, c)), done);
      else done(accept(request, caller));
    },
    { security: AGENT_KEY_SECURITY },
  );
}

/** The calling agent of a route in the agentKey scope (a route mounted elsewhere fails closed). */
export function callingAgent(request: FastifyRequest): AgentCaller {
  if (!request.agentCaller) throw unauthorized('Unauthorized');
  return request.agentCaller;
}
