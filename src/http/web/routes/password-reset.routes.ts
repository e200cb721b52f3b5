/**
 * Password reset by email: §4.18 leaves the endpoints "not shown", so the design is ours and is
 * written down here, in the OpenAPI description, and in docs/security.md "Password reset"
 * (src/domains/accounts/password-reset.service.ts does the work).
 */
import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import { type PasswordResetService, RESET_REQUESTED } from '../../../domains/accounts/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema, jsonBody, okSchema } from '../../shared/schemas.ts';
import { requestMeta } from '../../shared/session.ts';

const EMAIL_REQUIRED = 'Email is required';
const CONFIRM_REQUIRED = 'Token and password are required';

const requestBody = jsonBody({
  email: z
    .string({ error: EMAIL_REQUIRED })
    .trim()
    .min(1, { error: EMAIL_REQUIRED })
    .max(320, { error: 'Invalid email format' })
    .regex(z.regexes.email, { error: 'Invalid email format' }),
});

const confirmBody = jsonBody({
  token: z
    .string({ error: CONFIRM_REQUIRED })
    .min(1, { error: CONFIRM_REQUIRED })
    .max(128, { error: 'This password reset link is not valid. Request a new one.' })
    .describe('The `token` query parameter of the mailed link'),
  // the §4.1 sign-up rules, with sign-up's wording (registerBody in src/domains/accounts/accounts.schemas.ts)
  password: z
    .string({ error: CONFIRM_REQUIRED })
    .min(1, { error: CONFIRM_REQUIRED })
    .min(LIMITS.passwordMinLength, { error: `Password must be at least ${LIMITS.passwordMinLength} characters` })
    .max(LIMITS.passwordMaxLength, { error: `Password must be at most ${LIMITS.passwordMaxLength} characters` }),
});

export const passwordResetRoutes = (deps: { passwordReset: PasswordResetService }): RouteModule<'public'> => ({
  prefix: '/api/auth/password-reset',
  public: async (app) => {
    app.post('/request', {
      schema: {
        tags: ['accounts'],
        summary: 'Mail a password reset link',
        description:
          'Designed here (§4.18 "not shown"). No authentication. Answers 200 with the same body whether or not an account uses the ' +
          'email: the account lookup and the mail happen after the answer, so neither body nor timing tells. An account with a ' +
          'password, or whose address the identity provider or code host proved (so an account without a password can set one), ' +
          'gets a mail with `<PUBLIC_URL>/reset-password?token=…`, a link that works once, within 30 minutes (the token is stored ' +
          'only as its SHA-256); wallet accounts get none. An account is mailed a new link at most once every 10 minutes: a ' +
          'request in between answers the same 200 and mails nothing (the link mailed before is still live). Limited per IP ' +
          '(PASSWORD_RESET_RATE_LIMIT per hour) and per email and IP (PASSWORD_RESET_EMAIL_RATE_LIMIT per hour, whether or not it ' +
          "has an account: one caller's requests never use up another's), across replicas with REDIS_URL: 429 `{error, " +
          'retryAfter}` beyond. 503 with a sentence when this server sends no mail (no SMTP_URL; GET /api/features ' +
          '`passwordReset` says so up front).',
        body: requestBody,
        response: { 200: z.object({ ok: z.literal(true), message: z.string() }), ...errorResponses(400, 429, 503) },
      },
      handler: async (request) => {
        await deps.passwordReset.request(request.body.email, requestMeta(request));
        return { ok: true as const, message: RESET_REQUESTED };
      },
    });

    app.post('/confirm', {
      schema: {
        tags: ['accounts'],
        summary: 'Set a new password with a mailed link',
        description:
          'Designed here (§4.18 "not shown"). No authentication: the token of the mailed link is the proof. The password follows ' +
          'the sign-up rules with their wording (at least 8 characters, at most 256, not on the common-password list). Sets the ' +
          'new argon2id hash, spends the token and every other outstanding link of the user, and ends every session of the user ' +
          'on every replica at once (cached sessions evicted; open log streams and proxied connections end). No session is ' +
          'created: sign in with the new password. 400 with `error` for an unknown, used or expired token; of concurrent ' +
          'confirms with one token exactly one succeeds.',
        body: confirmBody,
        response: { 200: okSchema, 400: errorSchema },
      },
      handler: async (request) => {
        await deps.passwordReset.confirm(request.body.token, request.body.password);
        return { ok: true as const };
      },
    });
  },
});
