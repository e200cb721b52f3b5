/**
 * Admin rights and plans (docs/admin.md). A new instance has no admin: each start prints a
 * one-time setup link until someone opens it signed in; that account becomes the first admin.
 * Admins list users and set their plan (the way plans change without a card processor) and admin
 * flag, credit a user's wallet (money without a card processor), and issue a password reset
 * link to hand over (a reset without SMTP). `npm run admin`
 * (scripts/admin.ts) does the same from a shell.
 */
import { randomBytes } from 'node:crypto';
import type { Db } from '../../db/client.ts';
import { sha256 } from '../../lib/crypto.ts';
import { AppError, badRequest, forbidden, notFound } from '../../lib/errors.ts';
import { MICROS_PER_USD, microsToUsd } from '../../lib/money.ts';
import { hasUnstorableText } from '../../lib/unstorable-text.ts';
import type { LedgerService } from '../payments/index.ts';
import type { SessionWalletService } from '../session-wallet/index.ts';
import { adminRepo, type Plan } from './admin.repo.ts';

/** Largest single admin credit: a typo must not mint a fortune (docs/admin.md). */
export const ADMIN_CREDIT_MAX_USD = 10_000;
/** An admin credit is whole cents. */
export const ADMIN_CREDIT_STEP_MICROS = MICROS_PER_USD / 100;
export const ADMIN_CREDIT_NOTE_MAX = 500;
/** An idempotency key: visible ASCII, short enough to fit the journal's event id with its prefix. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

export type AdminCredit = {
  userId: string;
  address: string;
  amountUsd: string;
  note: string | null;
  /** the journal row's id and time */
  entryId: number;
  createdAt: string;
  /** the wallet's balance right after this credit (the same on every repeat) */
  balanceAfter: string;
};

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

/**
 * Issues a one-time password reset link for a user (the accounts domain's createAdminResetLinks):
 * declared here for the same reason as SessionEvictor.
 */
export type ResetLinkIssuer = { issue(userId: string): Promise<{ link: string; email: string; expiresAt: string }> };

/** `sessionCache`: a changed admin flag must not wait for cached sessions (5 s) to expire. */
export function createAdminService(deps: {
  db: Db;
  publicUrl: string;
  sessionCache?: SessionEvictor | undefined;
  /** where an admin credit goes: the user's session wallet, created when missing */
  wallets: Pick<SessionWalletService, 'ensureAddress' | 'address'>;
  /** the one way money moves (docs/payments.md "The ledger") */
  ledger: Pick<LedgerService, 'credit' | 'entry'>;
  /** password reset links an admin hands over (docs/admin.md "A password reset link without email") */
  resetLinks: ResetLinkIssuer;
  now?: () => Date;
}) {
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

    /**
     * Credits `amountMicros` to the user's session wallet (created when the user has none) through
     * the ledger, once per (admin, `requestId`): the journal's unique event id decides, so a repeat
     * (even a concurrent one) credits nothing and answers the first credit again (`replayed`). The
     * same id with another user, amount or note is refused (409): it is not a repeat.
     *
     * Everything that could make the stored row differ from the request is refused before any money
     * moves (a note PostgreSQL cannot store as sent: 400), and the request that inserted the journal
     * row always gets its 200: a 409 after crediting would invite a retry under a new key, which
     * credits twice. Only a repeat is compared with the row, on normalised values.
     */
    async creditUser(
      actor: AdminActor,
      userId: string,
      input: { amountMicros: number; note: string | null; requestId: string },
    ): Promise<{ credit: AdminCredit; replayed: boolean }> {
      requireAdmin(actor);
      const { amountMicros, requestId } = input;
      const note = input.note?.trim() || null;
      if (
        !Number.isSafeInteger(amountMicros) ||
        amountMicros <= 0 ||
        amountMicros > ADMIN_CREDIT_MAX_USD * MICROS_PER_USD ||
        amountMicros % ADMIN_CREDIT_STEP_MICROS !== 0
      ) {
        throw badRequest(`Invalid amountUsd: a number more than 0 and at most ${ADMIN_CREDIT_MAX_USD}, in whole cents`);
      }
      if (note !== null && note.length > ADMIN_CREDIT_NOTE_MAX)
        throw badRequest(`Invalid note: at most ${ADMIN_CREDIT_NOTE_MAX} characters`);
      if (note !== null && hasUnstorableText(note)) throw badRequest('Invalid note: contains a NUL character or an unpaired surrogate');
      if (!IDEMPOTENCY_KEY.test(requestId)) throw badRequest('Idempotency-Key must be 1 to 200 visible ASCII characters');
      const user = await adminRepo.findUser(db.kysely, userId);
      if (!user) throw notFound('User not found');
      const eventId = `admin_credit:${actor.id}:${requestId}`;
      // a repeat may spell the same note in another Unicode normalisation form: the same credit
      const sameNote = (a: string | null, b: string | null) => (a === null || b === null ? a === b : a.normalize() === b.normalize());
      const isRepeat = (e: { address: string; amountMicros: number; note: string | null }, address: string | null) =>
        address !== null && e.address === address.toLowerCase() && e.amountMicros === amountMicros && sameNote(e.note, note);
      const reused = () => new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used for a different credit');
      // a repeat is answered without side effects (a reused key must not create a wallet either)
      const prior = await deps.ledger.entry(eventId);
      if (prior && !isRepeat(prior, await deps.wallets.address(user.id))) throw reused();
      let replayed = true;
      if (!prior) {
        const address = await deps.wallets.ensureAddress(user.id);
        const r = await deps.ledger.credit({ address, amountMicros, eventId, source: 'admin_credit', note, actorUserId: actor.id });
        replayed = !r.credited;
      }
      const entry = await deps.ledger.entry(eventId);
      // the row exists: this request or an earlier one with the same id inserted it
      if (!entry) throw new Error(`admin credit ${eventId} has no journal row`);
      // a concurrent request with the same id and other values lost the insert: refused, nothing credited
      if (replayed && !isRepeat(entry, await deps.wallets.address(user.id))) throw reused();
      return {
        replayed,
        credit: {
          userId: user.id,
          address: entry.address,
          amountUsd: microsToUsd(entry.amountMicros),
          note: entry.note,
          entryId: entry.id,
          createdAt: entry.createdAt.toISOString(),
          balanceAfter: microsToUsd(entry.balanceAfterMicros),
        },
      };
    },

    /**
     * A one-time link that sets a new password for the user, for the admin to hand over (the way
     * to reset a password without SMTP). 404 for an unknown user, 409 for a wallet account.
     */
    async resetLink(actor: AdminActor, userId: string) {
      requireAdmin(actor);
      return deps.resetLinks.issue(userId);
    },

    /** `npm run admin -- credit <email> <usd> [note]`: the user's id, or undefined for an unknown email. */
    findUserIdByEmail: async (email: string) => (await adminRepo.findUserByEmail(db.kysely, email))?.id,

    /** `npm run admin -- [--revoke] <email>` */
    async setAdminByEmail(email: string, isAdmin: boolean) {
      const row = await adminRepo.setAdminByEmail(db.kysely, email, isAdmin);
      if (row) deps.sessionCache?.evictUser(row.id);
      return row;
    },
  };
}

export type AdminService = ReturnType<typeof createAdminService>;
