/**
 * Session cookie handling (§4.1, §5): the cookie `service-session` carries a random token; only
 * its SHA-256 is stored. The web app's session scope (./routes.ts) runs `guard` on every route in
 * it, which resolves the user once and sets `request.user` (the admin scope runs `adminGuard`, which
 * also refuses a user who is not an admin); the account scope runs the guard of
 * `createAccountGuard`, which takes an `sk_` API key or else the session and sets `request.caller`
 * with the credential it was given. The few public routes that merely accept a session
 * (docs/architecture.md "Routes and scopes") call `user(request)`, resolved lazily and cached per
 * request.
 */

import type {} from '@fastify/cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LIMITS } from '../../config/limits.ts';
import type { AccountsService, NewSession, SessionUser } from '../../domains/accounts/index.ts';
import type { KeyLimits, KeysService } from '../../domains/keys/index.ts';
import { forbidden, unauthorized } from '../../lib/errors.ts';
import type { StreamCredential } from '../../lib/eviction-bus.ts';
import { documented } from './openapi.ts';
import { ACCOUNT_SECURITY, SESSION_SECURITY } from './security.ts';

export const SESSION_COOKIE = 'service-session';

/** The request's session lookup, started once (a decorated slot: cheaper than a WeakMap keyed by request). */
const LOOKUP = Symbol('sessionLookup');

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The signed-in user. Set by the session scope's guard before the body is read; null in public
     * routes (they call `SessionAuth.user(request)` when a session is optional). Read it with `currentUser`.
     */
    user: SessionUser | null;
    /** The account scope's caller (a user API key or the session cookie); null when the route accepts anonymous callers. Read it with `currentCaller`. */
    caller: Caller | null;
    [LOOKUP]: Promise<SessionUser | null> | null;
  }
}

export type SessionAuth = {
  /** The signed-in user, or null. Cached on the request. */
  user(request: FastifyRequest): Promise<SessionUser | null>;
  /**
   * The session scope's hook (`onRequest`): sets `request.user`, or answers 401 `Unauthorized`
   * before the body is parsed or validated, whatever the body says.
   */
  guard(request: FastifyRequest): Promise<void>;
  /**
   * The admin scope's hook (`onRequest`): the session guard, then 403 `ADMIN_REQUIRED` for a user
   * who is not an admin, before the body is parsed or validated.
   */
  adminGuard(request: FastifyRequest): Promise<void>;
  setCookie(reply: FastifyReply, session: NewSession): void;
  clearCookie(reply: FastifyReply): void;
  token(request: FastifyRequest): string | undefined;
};

/** The session plugin: decorates `request.user` on the web app and returns the session helpers. */
export function registerSession(
  app: FastifyInstance<any, any, any, any, any>,
  accounts: AccountsService,
  options: { secure: boolean },
): SessionAuth {
  app.decorateRequest('user', null);
  app.decorateRequest('caller', null);
  app.decorateRequest(LOOKUP, null);
  return createSessionAuth(accounts, options);
}

/**
 * The signed-in user of a route in the session scope. The scope's guard has set it; the 401 is
 * for a route mounted in the public scope by mistake, which then fails closed.
 */
export function currentUser(request: FastifyRequest): SessionUser {
  if (!request.user) throw unauthorized('Unauthorized');
  return request.user;
}

function createSessionAuth(accounts: AccountsService, options: { secure: boolean }): SessionAuth {
  const cookieOptions = { httpOnly: true, sameSite: 'lax' as const, path: '/', secure: options.secure };
  const token = (request: FastifyRequest) => request.cookies[SESSION_COOKIE] || undefined;
  const user = (request: FastifyRequest) => (request[LOOKUP] ??= accounts.sessionUser(token(request)));
  const require = async (request: FastifyRequest) => {
    const u = await user(request);
    if (!u) throw unauthorized('Unauthorized', unauthorizedBody(request));
    return u;
  };
  return {
    user,
    token,
    // tagged so routes that run it are documented with the session cookie (./openapi.ts)
    guard: documented(
      async (request: FastifyRequest) => {
        request.user = sessionConfig(request)?.sessionOptional ? await user(request) : await require(request);
      },
      { security: SESSION_SECURITY },
    ),
    adminGuard: documented(
      async (request: FastifyRequest) => {
        const u = await require(request);
        if (!u.isAdmin) throw forbidden('Admin access required', 'ADMIN_REQUIRED');
        request.user = u;
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

/**
 * What a route of the session scope adds to its 401 body (§7: the workflows list answers
 * `{error, workflows: []}`): `config: { unauthorizedBody: { workflows: [] } }` on the route.
 */
export type SessionRouteConfig = {
  unauthorizedBody?: Record<string, unknown>;
  /** the route also serves a caller without a session (`request.user` null); it declares its own OpenAPI `security` */
  sessionOptional?: boolean;
};

const sessionConfig = (request: FastifyRequest) => request.routeOptions.config as SessionRouteConfig | undefined;
const unauthorizedBody = (request: FastifyRequest) => sessionConfig(request)?.unauthorizedBody;

/**
 * Who calls a route of the account scope, by a user API key or by the session cookie, and that
 * credential: what a long-lived answer opened with it is watched by (the agent proxy's streams and
 * sockets end when it is revoked, docs/agents.md "Agent content and streams").
 */
export type Caller = {
  userId: string;
  email: string;
  plan: string;
  isAdmin: boolean;
  credential: StreamCredential;
  /**
   * The API key's limits when the caller came with one (null for the session): the agents it
   * reaches, which the routes it reaches apply (docs/payments.md "API keys"), and its budget.
   */
  key: KeyLimits | null;
};

/**
 * A route's settings for the account scope (`config` on the route):
 * - `callerOptional`: the route also serves anonymous callers (`request.caller` null);
 * - `unauthorized`: the route's own 401 texts, for a key that is not a valid `sk_` key of a user
 *   (`invalidKey`) and for a request without a key or a session (`missing`); default `Unauthorized`.
 * Only `sk_` keys are accepted on every route of the scope (keys.authenticate refuses any other).
 */
export type AccountRouteConfig = { callerOptional?: boolean; unauthorized?: { invalidKey: string; missing: string } };

/**
 * The account scope's hook (`onRequest`): `Authorization: Bearer sk_…` is one of the user's API
 * keys (401 when invalid — unknown, deleted, expired, or an old secret past its roll's grace —
 * whatever else the request carries); otherwise the session cookie. No credential: 401, or
 * `request.caller` null on a `callerOptional` route. The 401 texts are the route's `unauthorized`,
 * else `Unauthorized`. A session caller's plan is `network` for an admin, else `solo`; a key's is
 * its owner's plan. A key with a rate limit of its own is counted here, on every route of the
 * scope: 429 `KEY_RATE_LIMITED` with `Retry-After` past it (docs/payments.md "API keys").
 */
export function createAccountGuard(session: SessionAuth, keys: Pick<KeysService, 'authenticate' | 'rateLimit'>) {
  return documented(
    async (request: FastifyRequest) => {
      const config = request.routeOptions.config as AccountRouteConfig | undefined;
      const auth = request.headers.authorization;
      if (typeof auth === 'string' && /^Bearer\s/i.test(auth)) {
        const apiKey = auth.slice(7).trim();
        const v = await keys.authenticate(apiKey);
        if (!v.valid) throw unauthorized(config?.unauthorized?.invalidKey ?? 'Unauthorized');
        const { profile, key } = v;
        request.caller = { userId: profile.userId, email: profile.email, plan: profile.plan, isAdmin: false, credential: { apiKey }, key };
        await keys.rateLimit(key);
        return;
      }
      const user = await session.user(request);
      if (user) {
        request.caller = {
          userId: user.id,
          email: user.email,
          plan: user.isAdmin ? 'network' : 'solo',
          isAdmin: user.isAdmin,
          // a session was found, so its cookie is there
          credential: { session: session.token(request)! },
          key: null,
        };
        return;
      }
      if (!config?.callerOptional) throw unauthorized(config?.unauthorized?.missing ?? 'Unauthorized');
    },
    { security: ACCOUNT_SECURITY },
  );
}

/**
 * The caller of a route in the account scope. The scope's guard has set it; the 401 is for a
 * route mounted elsewhere by mistake, or a `callerOptional` one that needs a caller after all.
 */
export function currentCaller(request: FastifyRequest): Caller {
  if (!request.caller) throw unauthorized('Unauthorized');
  return request.caller;
}

/** Client metadata stored with a session. */
export const requestMeta = (request: FastifyRequest) => ({
  ip: request.ip,
  userAgent: typeof request.headers['user-agent'] === 'string' ? request.headers['user-agent'].slice(0, 512) : null,
});
