/**
 * The backend's `agentKey` scope (./routes.ts): routes an agent calls back on with its own
 * platform key (`Authorization: Bearer apk_…`, issued per agent at deploy time), never
 * INTERNAL_API_KEY, which agents do not receive. The hook resolves the key to its agent before
 * the body is read (an unauthenticated caller learns nothing from validation) and sets
 * `request.agentCaller`; a missing, malformed, unknown or revoked key is 401 `Unauthorized`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { unauthorized } from '../../lib/errors.ts';
import { documented } from './openapi.ts';
import { AGENT_KEY_SECURITY } from './security.ts';

/** The agent a platform key belongs to, and its owner. */
export type AgentCaller = { agentId: string; userId: string };

declare module 'fastify' {
  interface FastifyRequest {
    /** The calling agent in the backend's agentKey scope; null elsewhere. Read it with `callingAgent`. */
    agentCaller: AgentCaller | null;
  }
}

/** Decorates `request.agentCaller` and returns the agentKey scope's hook. */
export function registerAgentKeyAuth(app: FastifyInstance<any, any, any, any, any>, verify: (key: string) => Promise<AgentCaller | null>) {
  app.decorateRequest('agentCaller', null);
  return documented(
    async function requireAgentKey(request: FastifyRequest): Promise<void> {
      const header = request.headers.authorization;
      if (typeof header !== 'string' || !header.startsWith('Bearer ')) throw unauthorized('Unauthorized');
      const caller = await verify(header.slice('Bearer '.length).trim());
      if (!caller) throw unauthorized('Unauthorized');
      request.agentCaller = caller;
    },
    { security: AGENT_KEY_SECURITY },
  );
}

/** The calling agent of a route in the agentKey scope (a route mounted elsewhere fails closed). */
export function callingAgent(request: FastifyRequest): AgentCaller {
  if (!request.agentCaller) throw unauthorized('Unauthorized');
  return request.agentCaller;
}
