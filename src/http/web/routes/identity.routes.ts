/**
 * §4.1 sign-in with the identity provider (OpenID Connect) and the code host (OAuth app), and the
 * signed-in user's linked accounts (§2 "Linked external account"; the path is ours). The flows
 * live in src/domains/accounts/external-signin.service.ts; these routes only move cookies and
 * redirects. Every answer of the four sign-in routes is a 302 (§7: callback errors are redirects
 * with `?error=<value>`); the failure reason is logged as one line, never a code or a token.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  type ExternalProvider,
  type ExternalSignIn,
  OAUTH_STATE_TTL_MS,
  oauthStateCookieName,
  type SignInStep,
} from '../../../domains/accounts/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorSchema } from '../../shared/schemas.ts';
import { currentUser, requestMeta, type SessionAuth } from '../../shared/session.ts';

const ERRORS = '`AccessDenied`, `IdpAuthFailed`, `IdpNotConfigured`, `IdpTokenFailed`, `IdpNoEmail`, `IdpAuthError`';
const ERROR_MEANINGS =
  'Errors redirect to `/login?error=<code>`: `AccessDenied` (declined at the provider, or identity-provider sign-in disabled for ' +
  'the account by a security event), `IdpAuthFailed` (another provider `error`, or a callback this browser did not start: no or ' +
  'expired state cookie, `state` mismatch, no `code`), `IdpNotConfigured`, `IdpTokenFailed` (code exchange or ID-token ' +
  'verification failed), `IdpNoEmail` (no verified email), `IdpAuthError` (anything else).';

const FIRST_PROOF =
  'The first proof of an address held by an account whose email was not verified (registered with a password) makes the ' +
  "account the prover's alone: the email becomes verified, every earlier session ends, and its password, if any, is cleared " +
  '(then GET /api/auth/session carries a `password-cleared` notice until DELETE /api/auth/notice).';

const redirectResponse = { 302: z.null().describe('Redirect (`Location`)') };
const callbackQuery = z
  .object({
    code: z.string().max(4096).optional(),
    state: z.string().max(512).optional(),
    error: z.string().max(256).optional().describe(`Set by the provider instead of \`code\`; redirected as one of ${ERRORS}`),
  })
  .catchall(z.unknown());

const linkedAccount = z.object({
  id: z.string(),
  provider: z.enum(['idp', 'codehost']),
  email: z.string().nullable().describe('The address the provider vouched for'),
  linkedAt: z.string().describe('ISO 8601'),
});

export const identityRoutes = (deps: {
  signIn: ExternalSignIn;
  session: SessionAuth;
  secure: boolean;
}): RouteModule<'public' | 'session'> => {
  const { signIn, session } = deps;
  const cookieOptions = (provider: ExternalProvider) =>
    // Lax: the provider's redirect back is a top-level GET, which carries it; the callback path only
    ({ httpOnly: true, sameSite: 'lax' as const, secure: deps.secure, path: `/api/auth/${provider}/callback` });

  const finish = (request: FastifyRequest, reply: FastifyReply, provider: ExternalProvider, step: SignInStep) => {
    if (step.failure) request.log.warn({ provider, code: step.failure.code, reason: step.failure.reason }, 'external sign-in refused');
    if (step.stateCookie)
      reply.setCookie(oauthStateCookieName(provider), step.stateCookie, { ...cookieOptions(provider), maxAge: OAUTH_STATE_TTL_MS / 1000 });
    if (step.session) session.setCookie(reply, step.session);
    return reply.redirect(step.redirect, 302);
  };

  const start = (provider: ExternalProvider) => async (request: FastifyRequest, reply: FastifyReply) =>
    finish(request, reply, provider, await signIn.start(provider));
  const callback = (provider: ExternalProvider) => async (request: FastifyRequest, reply: FastifyReply) => {
    const query: Record<string, string> = {};
    for (const [k, v] of Object.entries(request.query as Record<string, unknown>)) if (typeof v === 'string') query[k] = v;
    const sealed = request.cookies[oauthStateCookieName(provider)];
    // one cookie, one attempt: cleared whatever the outcome
    if (sealed !== undefined) reply.clearCookie(oauthStateCookieName(provider), cookieOptions(provider));
    return finish(request, reply, provider, await signIn.callback(provider, query, sealed, requestMeta(request)));
  };

  return {
    prefix: '/api/auth',
    public: async (app) => {
      app.get('/idp', {
        schema: {
          tags: ['accounts'],
          summary: 'Sign in with the identity provider',
          description:
            'Redirects to the identity provider (OpenID Connect, endpoints discovered from `{IDP_ISSUER}/.well-known/openid-configuration`): ' +
            'scopes `openid email profile`, `access_type=offline`, `prompt=select_account`, authorization code with PKCE (S256), `state` ' +
            'and `nonce`, kept in an encrypted HttpOnly cookie valid 10 minutes on the callback path. IDP_CLIENT_ID or IDP_CLIENT_SECRET ' +
            'unset: redirect to `/login?error=IdpNotConfigured`; provider discovery failing: `/login?error=IdpAuthError`.',
          response: redirectResponse,
        },
        handler: start('idp'),
      });
      app.get('/idp/callback', {
        schema: {
          tags: ['accounts'],
          summary: 'The identity provider returns here',
          description:
            'Called by the provider. A provider `error` is redirected without exchanging. Otherwise `state` must match the cookie set by ' +
            'GET /api/auth/idp in this browser; the code is exchanged (PKCE) and the ID token verified (issuer, audience, expiry, nonce, ' +
            "RS256 signature from the provider's JWKS). The user with the link, else the user with the verified email (linked, not " +
            'duplicated), else a new user; the refresh token is stored encrypted; the session cookie is set as by /api/auth/login; ' +
            `redirect to \`/dashboard\`. ${FIRST_PROOF} ${ERROR_MEANINGS}`,
          querystring: callbackQuery,
          response: redirectResponse,
        },
        handler: callback('idp'),
      });
      app.get('/codehost', {
        schema: {
          tags: ['accounts'],
          summary: 'Sign in with the code host',
          description:
            'Redirects to `{CODEHOST_URL}/login/oauth/authorize` (scopes `read:user user:email`) with `state`, kept in an encrypted ' +
            'HttpOnly cookie valid 10 minutes. CODEHOST_CLIENT_ID or CODEHOST_CLIENT_SECRET unset: `/login?error=IdpNotConfigured`.',
          response: redirectResponse,
        },
        handler: start('codehost'),
      });
      app.get('/codehost/callback', {
        schema: {
          tags: ['accounts'],
          summary: 'The code host returns here',
          description:
            'Called by the code host. Same sequence and error codes as /api/auth/idp/callback: `state` checked against the cookie, the ' +
            'code exchanged at `{CODEHOST_URL}/login/oauth/access_token`, the user and the primary verified email read from ' +
            `\`{CODEHOST_API_URL}/user\` and \`/user/emails\`, linked or created, session set, redirect to \`/dashboard\`. ${FIRST_PROOF} ` +
            `${ERROR_MEANINGS} ` +
            '(identity-provider sign-in being disabled does not refuse the code host.)',
          querystring: callbackQuery,
          response: redirectResponse,
        },
        handler: callback('codehost'),
      });
    },
    session: async (app) => {
      app.get('/linked-accounts', {
        schema: {
          tags: ['accounts'],
          summary: 'Your linked sign-in accounts',
          description:
            'Not in the specification (ours; §2 "Linked external account"): the identity-provider and code-host accounts that sign in ' +
            'as you, oldest first. Tokens are never returned.',
          response: { 200: z.object({ accounts: z.array(linkedAccount) }), 401: errorSchema },
        },
        handler: async (request) => ({ accounts: await signIn.listLinked(currentUser(request).id) }),
      });
    },
  };
};
