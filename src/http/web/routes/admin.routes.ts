/**
 * Admin endpoints (docs/admin.md; §5 "Admin check" with proof instead of a claimed email):
 * the first-admin setup link, the users list with plan and admin changes, an admin's credit
 * to a user's wallet (docs/payments.md "Credits by an admin"), and a password reset link to hand over. Admin-only routes
 * answer 401 without a session and 403 `ADMIN_REQUIRED` for other users (§5).
 */

import { z } from 'zod';
import { ADMIN_CREDIT_MAX_USD, ADMIN_CREDIT_NOTE_MAX, type AdminService, IDEMPOTENCY_KEY } from '../../../domains/admin/index.ts';
import { usdToMicros } from '../../../lib/money.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, jsonBody } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const plan = z.enum(['solo', 'collective', 'label', 'network']);
const adminUser = z.object({
  id: z.string(),
  email: z.string(),
  name: z.string(),
  plan,
  subscriptionStatus: z.string(),
  isAdmin: z.boolean(),
  emailVerified: z.boolean(),
  createdAt: z.string(),
});

const AMOUNT_RULE = `Invalid amountUsd: a number more than 0 and at most ${ADMIN_CREDIT_MAX_USD}, in whole cents`;
/** micro-USD of a JSON number with at most 2 decimals, else undefined (no float arithmetic: money.ts) */
const centsMicros = (n: number) => {
  const m = usdToMicros(n);
  return m !== undefined && m % 10_000 === 0 ? m : undefined;
};

const creditBody = jsonBody({
  amountUsd: z
    .number({ error: AMOUNT_RULE })
    .positive({ error: AMOUNT_RULE })
    .max(ADMIN_CREDIT_MAX_USD, { error: AMOUNT_RULE })
    .refine((n) => centsMicros(n) !== undefined, { error: AMOUNT_RULE })
    .describe(`USD, more than 0 and at most ${ADMIN_CREDIT_MAX_USD}, at most 2 decimals`),
  note: z
    .string({ error: 'Invalid note: a string' })
    .max(ADMIN_CREDIT_NOTE_MAX, { error: `Invalid note: at most ${ADMIN_CREDIT_NOTE_MAX} characters` })
    .optional()
    .describe('Why: shown to the user in their wallet journal (optional, at most 500 characters)'),
});

const creditView = z.object({
  credit: z.object({
    userId: z.string(),
    address: z.string().describe("the user's session wallet (created by this credit when the user had none)"),
    amountUsd: z.string().describe('decimal USD'),
    note: z.string().nullable(),
    entryId: z.number().describe('the journal row'),
    createdAt: z.string(),
    balanceAfter: z.string().describe("the wallet's balance right after this credit, decimal USD"),
  }),
});

export const adminRoutes = (deps: { admin: AdminService }): RouteModule<'session' | 'admin'> => {
  return {
    prefix: '/api/admin',
    session: async (app) => {
      app.get('/setup', {
        schema: {
          tags: ['admin'],
          summary: 'Become the first admin with the setup token printed at start-up',
          description:
            'While no account is an admin, each start of the platform logs a single-use link (valid 24 hours) to the dashboard page ' +
            '`/dashboard/setup?token=…`, which signs the visitor in first and then calls this endpoint with the token and says what happened. ' +
            'The signed-in account that presents the token becomes an admin. Signed out: 401. ' +
            'A used, replaced or expired token: 404 `SETUP_LINK_INVALID`.',
          querystring: z.object({ token: z.string().max(128) }),
          response: { 200: z.object({ ok: z.literal(true), isAdmin: z.literal(true) }), ...errorResponses(401, 404) },
        },
        handler: async (request) => {
          const user = currentUser(request);
          await deps.admin.claimSetup(user.id, request.query.token);
          return { ok: true as const, isAdmin: true as const };
        },
      });
    },
    // the admin scope answers 403 ADMIN_REQUIRED to a user who is not an admin (admin.service.ts checks again)
    admin: async (app) => {
      app.get('/users', {
        schema: {
          tags: ['admin'],
          summary: 'List users with plan, subscription status and admin flag (admins)',
          querystring: z.object({
            limit: z.coerce.number().int().min(1).max(100).default(50),
            offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
          }),
          response: {
            200: z.object({ users: z.array(adminUser), total: z.number(), limit: z.number(), offset: z.number() }),
            ...errorResponses(401, 403),
          },
        },
        handler: async (request) => {
          const user = currentUser(request);
          return deps.admin.listUsers(user, request.query);
        },
      });

      app.patch('/users/:id', {
        schema: {
          tags: ['admin'],
          summary: "Set a user's plan and/or admin flag (admins)",
          description:
            'Without a card processor this is how a user gets another plan (every account starts on DEFAULT_PLAN). ' +
            'With one, a later subscription webhook may change the plan again. Admins cannot revoke their own rights (400).',
          params: z.object({ id: z.uuid() }),
          body: z
            .object({ plan: plan.optional(), isAdmin: z.boolean().optional() })
            .refine((b) => b.plan !== undefined || b.isAdmin !== undefined, { error: 'plan or isAdmin required' }),
          response: { 200: z.object({ user: adminUser }), ...errorResponses(400, 401, 403, 404) },
        },
        handler: async (request) => {
          const user = currentUser(request);
          return deps.admin.updateUser(user, request.params.id, request.body);
        },
      });

      app.post('/users/:id/reset-link', {
        schema: {
          tags: ['admin'],
          summary: 'A one-time password reset link for a user, to hand over (admins)',
          description:
            'The way to reset a password without SMTP (docs/admin.md "A password reset link without email"): answers a link to the ' +
            'dashboard page `/reset-password?token=…` that sets a new password for the user, exactly like a mailed reset link ' +
            '(single use, stored only as a hash; POST /api/auth/password-reset/confirm spends it and signs the user out everywhere), ' +
            "but valid 24 hours and shown to the admin, who passes it on by a channel they trust. Issuing one makes the user's " +
            'earlier links stop working. Nothing is mailed. Logged with the admin and the user (never the link). 401 signed out, ' +
            '403 `ADMIN_REQUIRED` for non-admins, 404 for an unknown user, 409 for a wallet account (it has no password).',
          params: z.object({ id: z.uuid({ error: 'Invalid user id' }) }),
          response: {
            200: z.object({
              link: z.string().describe('PUBLIC_URL + `/reset-password?token=…`: works once'),
              email: z.string().describe('the account the link is for'),
              expiresAt: z.string().describe('when the link stops working'),
            }),
            ...errorResponses(400, 401, 403, 404, 409),
          },
        },
        handler: async (request) => {
          const user = currentUser(request);
          const issued = await deps.admin.resetLink(user, request.params.id);
          // who handed out a way into whose account: the link itself never reaches the log
          request.log.info({ admin: user.id, user: request.params.id }, 'admin issued a password reset link');
          return issued;
        },
      });

      app.post('/users/:id/credit', {
        schema: {
          tags: ['admin'],
          summary: "Credit a user's wallet (admins): money without a card processor",
          description:
            "Credits `amountUsd` to the user's session wallet through the ledger, creating the wallet when the user has none; the " +
            "journal row carries the `note` and the admin's id, and the user sees it in GET /api/wallet/journal. The balance pays for " +
            'gateway calls (POST /api/v1/gateway with a session or an `sk_` key). `amountUsd`: a JSON number, more than 0 and at most ' +
            `${ADMIN_CREDIT_MAX_USD}, in whole cents (400 otherwise). \`note\`: at most ${ADMIN_CREDIT_NOTE_MAX} characters without a NUL ` +
            'character or an unpaired surrogate (400 before anything is credited: it could not be stored as sent). ' +
            'Header `Idempotency-Key` (required, 1-200 visible ASCII characters): one credit per key and admin. A repeat with the same ' +
            'key, even concurrent, credits nothing and answers the first credit again with header `Idempotent-Replayed: true`; the ' +
            'same key with another user, amount or note is 409 `IDEMPOTENCY_KEY_REUSED` (never the request that credited). 401 signed ' +
            'out, 403 `ADMIN_REQUIRED` for ' +
            'non-admins, 404 for an unknown user.',
          params: z.object({ id: z.uuid({ error: 'Invalid user id' }) }),
          headers: z
            .object({
              'idempotency-key': z
                .string({ error: 'Idempotency-Key header required' })
                .regex(IDEMPOTENCY_KEY, { error: 'Idempotency-Key must be 1 to 200 visible ASCII characters' })
                .describe('One credit per key (per admin); a new random id per intended credit'),
            })
            .loose(),
          body: creditBody,
          response: { 200: creditView, ...errorResponses(400, 401, 403, 404, 409) },
        },
        handler: async (request, reply) => {
          const user = currentUser(request);
          const { amountUsd, note } = request.body;
          const result = await deps.admin.creditUser(user, request.params.id, {
            // the schema admitted only whole cents
            amountMicros: centsMicros(amountUsd)!,
            note: note ?? null,
            requestId: request.headers['idempotency-key'],
          });
          if (result.replayed) reply.header('idempotent-replayed', 'true');
          return { credit: result.credit };
        },
      });
    },
  };
};
