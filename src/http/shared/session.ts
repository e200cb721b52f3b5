/**
 * Session cookie handling (§4.1, §5): the cookie `service-session` carries a random token; only
 * its SHA-256 is stored. The user is resolved lazily, once per request, and only by routes
 * that need it.
 */

import type {} from '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { LIMITS } from '../../config/limits.ts';
import type { AccountsService, NewSession, SessionUser } from '../../domains/accounts/accounts.service.ts';
import { unauthorized } from '../../lib/errors.ts';
import { documented } from './openapi.ts';
import { SESSION_SECURITY } from './security.ts';

export const SESSION_COOKIE = 'service-session';

export type SessionAuth = {
  /** The signed-in user, or null. Cached on the request. */
  user(request: FastifyRequest): Promise<SessionUser | null>;
  /** The signed-in user, or 401 `Unauthorized`. */
  require(request: FastifyRequest): Promise<SessionUser>;
  /**
   * The same check as a route hook (`onRequest` / `preValidation`): a request without a session
   * gets 401 before its body is parsed or validated, whatever the body says.
   */
  guard(request: FastifyRequest): Promise<void>;
  setCookie(reply: FastifyReply, session: NewSession): void;
  clearCookie(reply: FastifyReply): void;
  token(request: FastifyRequest): string | undefined;
};

export function createSessionAuth(accounts: AccountsService, options: { secure: boolean }): SessionAuth {
  const cache = new WeakMap<FastifyRequest, Promise<SessionUser | null>>();
  const cookieOptions = { httpOnly: true, sameSite: 'lax' as const, path: '/', secure: options.secure };
  const token = (request: FastifyRequest) => request.cookies[SESSION_COOKIE] || undefined;
  const user = (request: FastifyRequest) => {
    let p = cache.get(request);
    if (!p) {
      p = accounts.sessionUser(token(request));
      cache.set(request, p);
    }
    return p;
  };
  const require = async (request: FastifyRequest) => {
    const u = await user(request);
    if (!u) throw unauthorized('Unauthorized');
    return u;
  };
  return {
    user,
    token,
    require,
    // tagged so routes that run it are documented with the session cookie (./openapi.ts)
    guard: documented(
      async (request: FastifyRequest) => {
        await require(request);
      },
      { security: SESSION_SECURITY },
    ),
    setCookie(reply, session) {
      reply.setCookie(SESSION_COOKIE, session.token, {
        ...cookieOptions,
        maxAge: Math.floor(LIMITS.sessionTtlMs / 1000),
        expires: session.expiresAt,
      });
    },
    clearCookie(reply) {
      reply.clearCookie(SESSION_COOKIE, cookieOptions);
    },
  };
}

/** Client metadata stored with a session. */
export const requestMeta = (request: FastifyRequest) => ({
  ip: request.ip,
  userAgent: typeof request.headers['user-agent'] === 'string' ? request.headers['user-agent'].slice(0, 512) : null,
});
