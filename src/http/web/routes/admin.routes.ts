/**
 * Admin endpoints (docs/admin.md; §5 "Admin check" with proof instead of a claimed email):
 * the first-admin setup link, and the users list with plan and admin changes. Admin-only routes
 * answer 401 without a session and 403 `ADMIN_REQUIRED` for other users (§5).
 */

import { z } from 'zod';
import type { AdminService } from '../../../domains/admin/admin.service.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorSchema } from '../../shared/schemas.ts';
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
          response: { 200: z.object({ ok: z.literal(true), isAdmin: z.literal(true) }), 401: errorSchema, 404: errorSchema },
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
            401: errorSchema,
            403: errorSchema,
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
          response: { 200: z.object({ user: adminUser }), 400: errorSchema, 401: errorSchema, 403: errorSchema, 404: errorSchema },
        },
        handler: async (request) => {
          const user = currentUser(request);
          return deps.admin.updateUser(user, request.params.id, request.body);
        },
      });
    },
  };
};
