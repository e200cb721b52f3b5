/**
 * Who is an admin (§5 "Admin check", with proof): an account marked `is_admin` (setup link,
 * another admin, `npm run admin`), or one whose email is in ADMIN_EMAILS *and verified* (an
 * identity provider vouched for it) *and* holds no password set before that verification.
 * Registering an address proves nothing about it, so an unverified ADMIN_EMAILS match counts only
 * when the operator turns verification off (ADMIN_EMAILS_REQUIRE_VERIFIED=false, for closed test
 * deployments). A password older than the proof may be a stranger's who registered the address
 * first (docs/identity.md "What a sign-in does"): such an account is not made an admin by its
 * address, however the address came to be verified, until a password is set after the proof
 * (a reset by the verified owner). `password_predates_verification` is kept by the database
 * (migration 215).
 */
import { type Config, isAdminEmail } from '../../config/env.ts';

export type AdminFacts = { email: string; is_admin: boolean; email_verified: boolean; password_predates_verification: boolean };

export function isAdminUser(config: Pick<Config, 'ADMIN_EMAILS' | 'ADMIN_EMAILS_REQUIRE_VERIFIED'>, user: AdminFacts): boolean {
  if (user.is_admin) return true;
  if (!isAdminEmail(config, user.email)) return false;
  if (!config.ADMIN_EMAILS_REQUIRE_VERIFIED) return true;
  return user.email_verified && !user.password_predates_verification;
}
