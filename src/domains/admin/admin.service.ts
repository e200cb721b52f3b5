/**
 * Admin rights and plans (docs/admin.md). A new instance has no admin: each start prints a
 * one-time setup link until someone opens it signed in; that account becomes the first admin.
 * Admins list users and set their plan (the way plans change without a card processor) and admin
 * flag. `npm run admin` (scripts/admin.ts) does the same from a shell.
 */
import { randomBytes } from 'node:crypto';
import type { Db } from '../../db/client.ts';
import { sha256 } from '../../lib/crypto.ts';
import { AppError, forbidden, notFound } from '../../lib/errors.ts';
import { adminRepo, type Plan } from './admin.repo.ts';

/** How long a printed setup link works (a restart prints a new one while no admin exists). */
export const SETUP_TOKEN_TTL_MS = 24 * 60 * 60 * 1000;

export type AdminActor = { id: string; isAdmin: boolean };

export type AdminUserView = {
  id: string;
  email: string;
  name: string;
  plan: Plan;
  subscriptionStatus: string;
  isAdmin: boolean;
  emailVerified: boolean;
  createdAt: string;
};

const view = (u: {
  id: string;
  email: string;
  name: string;
  plan: Plan;
  subscription_status: string;
  is_admin: boolean;
  email_verified: boolean;
  created_at: Date;
}): AdminUserView => ({
  id: u.id,
  email: u.email,
  name: u.name,
  plan: u.plan,
  subscriptionStatus: u.subscription_status,
  isAdmin: u.is_admin,
  emailVerified: u.email_verified,
  createdAt: u.created_at.toISOString(),
});

/**
 * What the admin service needs of the session cache (the accounts domain's SessionCache fits):
 * declared here, so admin does not depend on accounts (accounts reads admin's rule: one direction).
 */
export type SessionEvictor = { evictUser(userId: string): void };

/** `sessionCache`: a changed admin flag must not wait for cached sessions (5 s) to expire. */
export function createAdminService(deps: { db: Db; publicUrl: string; sessionCache?: SessionEvictor | undefined; now?: () => Date }) {
  const { db } = deps;
  const now = deps.now ?? (() => new Date());
  const requireAdmin = (actor: AdminActor) => {
    if (!actor.isAdmin) throw forbidden('Admin access required', 'ADMIN_REQUIRED');
  };

  return {
    /**
     * At start-up: when no account is an admin yet, a fresh single-use link (the token is kept
     * only as a hash). Returns the link to print, or undefined when an admin exists. The link is
     * the dashboard's setup page on PUBLIC_URL (the address the README says to open, so the
     * session cookie of that host goes with it): signed out it leads through the sign-in page,
     * then it spends the token with GET /api/admin/setup and says what happened.
     */
    async setupLinkIfNoAdmin(): Promise<string | undefined> {
      if (await adminRepo.hasAdmin(db.kysely)) return undefined;
      const token = randomBytes(24).toString('base64url');
      await adminRepo.replaceSetupToken(db.kysely, sha256(token), new Date(now().getTime() + SETUP_TOKEN_TTL_MS));
      return `${deps.publicUrl}/dashboard/setup?token=${token}`;
    },

    /** The signed-in account that opens the link becomes an admin; the link then stops working. */
    async claimSetup(userId: string, token: string): Promise<void> {
      if (!token || token.length > 128 || !(await adminRepo.spendSetupToken(db.kysely, sha256(token), userId))) {
        throw new AppError('SETUP_LINK_INVALID', 'This setup link is invalid, expired or already used');
      }
      deps.sessionCache?.evictUser(userId);
    },

    async listUsers(actor: AdminActor, page: { limit: number; offset: number }) {
      requireAdmin(actor);
      const [rows, total] = await Promise.all([adminRepo.listUsers(db.kysely, page.limit, page.offset), adminRepo.countUsers(db.kysely)]);
      return { users: rows.map(view), total, limit: page.limit, offset: page.offset };
    },

    async updateUser(actor: AdminActor, id: string, changes: { plan?: Plan | undefined; isAdmin?: boolean | undefined }) {
      requireAdmin(actor);
      // an admin cannot remove their own rights by accident and leave the instance without one
      if (changes.isAdmin === false && id === actor.id)
        throw new AppError('CANNOT_REVOKE_SELF', 'Admins cannot revoke their own admin rights');
      const row = await adminRepo.updateUser(db.kysely, id, { plan: changes.plan, is_admin: changes.isAdmin });
      if (!row) throw notFound('User not found');
      deps.sessionCache?.evictUser(id);
      return { user: view(row) };
    },

    /** `npm run admin -- [--revoke] <email>` */
    async setAdminByEmail(email: string, isAdmin: boolean) {
      const row = await adminRepo.setAdminByEmail(db.kysely, email, isAdmin);
      if (row) deps.sessionCache?.evictUser(row.id);
      return row;
    },
  };
}

export type AdminService = ReturnType<typeof createAdminService>;
