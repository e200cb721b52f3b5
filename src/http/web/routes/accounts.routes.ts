/**
 * §4.1 accounts and sessions (except OAuth and security-event receivers), plus the current user
 * and profile update whose paths the specification leaves "not shown" (documented here).
 */

import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  type AccountsService,
  loginBody,
  type NewSession,
  profile,
  profileBody,
  registerBody,
  signedIn,
  walletBody,
} from '../../../domains/accounts/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema, okSchema } from '../../shared/schemas.ts';
import { currentUser, requestMeta, type SessionAuth } from '../../shared/session.ts';

export const accountsRoutes = (deps: { accounts: AccountsService; session: SessionAuth }): RouteModule<'public' | 'session'> => {
  const { accounts, session } = deps;
  /** What every sign-in answers: the session cookie, and who is signed in. */
  const signedInAs = (reply: FastifyReply, s: NewSession) => {
    session.setCookie(reply, s);
    return { ok: true as const, user: s.user };
  };

  const nonceRoute = {
    schema: {
      tags: ['accounts'],
      summary: 'A SIWE nonce',
      description:
        'A random nonce for a wallet sign-in message; single use, valid 10 minutes. GET and POST are the same. The nonce is ' +
        'signed and carries its expiry (nothing is stored until it is spent at /api/wallet-auth). Limited per IP ' +
        '(NONCE_RATE_LIMIT per minute): 429 `{error, retryAfter}` beyond it.',
      response: { 200: z.object({ nonce: z.string() }), 429: errorSchema },
    },
    handler: async (request: FastifyRequest) => ({ nonce: await accounts.issueNonce(requestMeta(request)) }),
  };
  const updateProfile = {
    schema: {
      tags: ['accounts'],
      summary: 'Update the current user',
      description: 'POST or PATCH. Updatable field: `name` (1 to 64 characters after trim). Returns the updated user.',
      body: profileBody,
      response: { 200: profile, ...errorResponses(400, 401, 404) },
    },
    handler: async (request: { body: { name?: string | undefined } } & FastifyRequest) =>
      accounts.updateProfile(currentUser(request).id, request.body),
  };
  return {
    prefix: '/api',
    public: async (app) => {
      app.post('/register', {
        schema: {
          tags: ['accounts'],
          summary: 'Create an account',
          description:
            'Creates a user; no session is created (call login next). Emails are unique case-insensitively and stored lower-cased. ' +
            'Bot detection (when configured) reads `turnstileToken` or the `cf-turnstile-response` header. Sign-ups are limited per IP ' +
            '(REGISTER_RATE_LIMIT per hour; validated requests count). A password on the common-password list shipped by ' +
            '`@zxcvbn-ts/language-common` (compared case-insensitively) is 400 `Password is too common; choose a less guessable one`.',
          body: registerBody,
          response: { 201: z.object({ id: z.string(), email: z.string(), name: z.string() }), ...errorResponses(400, 403, 409, 429) },
        },
        handler: async (request, reply) => {
          const header = request.headers['cf-turnstile-response'];
          const user = await accounts.register(
            { ...request.body, botToken: request.body.turnstileToken ?? (typeof header === 'string' ? header : undefined) },
            requestMeta(request),
          );
          return reply.code(201).send(user);
        },
      });

      app.post('/auth/login', {
        schema: {
          tags: ['accounts'],
          summary: 'Sign in with email and password',
          description:
            'Sets the `service-session` cookie (HttpOnly, SameSite=Lax, Path=/, 30 days, Secure when PUBLIC_URL is https). Email is case-insensitive. ' +
            'Failed attempts are limited per account and client IP (LOGIN_FAILURE_LIMIT), per IP (LOGIN_IP_FAILURE_LIMIT) and per account ' +
            '(LOGIN_ACCOUNT_FAILURE_LIMIT; IPs holding a live session of the account are exempt) in windows of LOGIN_FAILURE_WINDOW_MS: ' +
            'beyond them 429 `{error, retryAfter}` (seconds, also in `Retry-After`). A successful sign-in clears its account+IP count.',
          body: loginBody,
          response: { 200: signedIn, ...errorResponses(400, 401, 429) },
        },
        handler: async (request, reply) =>
          signedInAs(reply, await accounts.login(request.body.email, request.body.password, requestMeta(request))),
      });

      app.get('/auth/session', {
        schema: {
          tags: ['accounts'],
          summary: 'The current session',
          description:
            'Always 200: `{user:null}` without a valid session. `user.notice` (added to the §4.1 shape, present only when there is ' +
            'one) is a one-time notice for the dashboard to show until DELETE /api/auth/notice dismisses it. Its one kind, ' +
            '`password-cleared`: the first time `provider` proved this address, the account had a password set before that ' +
            'proof, possibly by someone who registered the address first; that password was cleared and every session opened ' +
            'before ended (docs/identity.md "What a sign-in does").',
          response: {
            200: z.object({
              user: z
                .object({
                  id: z.string(),
                  name: z.string(),
                  email: z.string(),
                  isAdmin: z.boolean(),
                  notice: z
                    .object({
                      kind: z.literal('password-cleared'),
                      provider: z.enum(['idp', 'codehost']),
                      message: z.string().describe('The notice as a sentence for people'),
                    })
                    .optional(),
                })
                .nullable(),
            }),
          },
        },
        handler: async (request) => ({ user: await session.user(request) }),
      });

      app.post('/auth/signout', {
        schema: {
          tags: ['accounts'],
          summary: 'Sign out',
          description: 'Deletes the session record and clears the cookie. Always 200.',
          response: { 200: okSchema },
        },
        handler: async (request, reply) => {
          await accounts.signOut(session.token(request));
          session.clearCookie(reply);
          return { ok: true as const };
        },
      });

      app.get('/auth/siwe', {
        schema: {
          tags: ['accounts'],
          summary: 'What a wallet sign-in message must name',
          description:
            'Not in the specification (ours): the `domain`, `uri`, `chainId` and `version` a SIWE (EIP-4361) message must carry for ' +
            'POST /api/wallet-auth to accept it, so a client can build the message without knowing PUBLIC_URL or SIWE_CHAIN_ID.',
          security: [],
          response: { 200: z.object({ domain: z.string(), uri: z.string(), chainId: z.number(), version: z.literal('1') }) },
        },
        handler: async () => accounts.siweParameters(),
      });
      app.get('/auth/nonce', nonceRoute);
      app.post('/auth/nonce', nonceRoute);

      app.post('/wallet-auth', {
        schema: {
          tags: ['accounts'],
          summary: 'Sign in with Ethereum (SIWE)',
          description:
            'Verifies a SIWE message signed by `address`: its nonce must come from /api/auth/nonce (single use, 10 minutes); its domain ' +
            'and URI must be this site (PUBLIC_URL); its chain id must be SIWE_CHAIN_ID; its Version must be 1 (EIP-4361). A signature that does not recover to `address` ' +
            "may be a smart wallet's (ERC-1271, ERC-6492) and is verified through SIWE_RPC_URL; when that RPC does not answer the " +
            'result is 503 (try again), not 401. Creates the user `<address>@WALLET_EMAIL_DOMAIN` on first sign-in, or links the wallet to the ' +
            'existing user with that email. Sets the session cookie.',
          body: walletBody,
          response: { 200: signedIn, ...errorResponses(400, 401, 503) },
        },
        handler: async (request, reply) => signedInAs(reply, await accounts.walletAuth(request.body, requestMeta(request))),
      });
    },
    session: async (app) => {
      app.get('/user', {
        schema: {
          tags: ['accounts'],
          summary: 'The current user',
          description: 'Path not shown in the specification (§4.1 "Current user and profile"); chosen as /api/user.',
          response: { 200: profile, ...errorResponses(401, 404) },
        },
        handler: async (request) => accounts.getProfile(currentUser(request).id),
      });

      app.post('/user', updateProfile);
      app.patch('/user', updateProfile);

      app.delete('/auth/notice', {
        schema: {
          tags: ['accounts'],
          summary: 'Dismiss the session notice',
          description:
            "Not in the specification (ours): dismisses the signed-in user's `notice` of GET /api/auth/session, for every " +
            'session of the user. 200 whether or not there was one.',
          response: { 200: okSchema, 401: errorSchema },
        },
        handler: async (request) => {
          await accounts.dismissNotices(currentUser(request).id);
          return { ok: true as const };
        },
      });
    },
  };
};
