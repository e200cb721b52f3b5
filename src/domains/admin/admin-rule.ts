/**
 * Who is an admin (§5 "Admin check", with proof): an account marked `is_admin` (setup link,
 * another admin, `npm run admin`), or one whose email is in ADMIN_EMAILS *and verified* (an
 * identity provider vouched for it). Registering an address proves nothing about it, so an
 * unverified ADMIN_EMAILS match counts only when the operator turns verification off
 * (ADMIN_EMAILS_REQUIRE_VERIFIED=false, for closed test deployments).
 */
import { type Config, isAdminEmail } from '../../config/env.ts';

export type AdminFacts = { email: string; is_admin: boolean; email_verified: boolean };

export function isAdminUser(config: Pick<Config, 'ADMIN_EMAILS' | 'ADMIN_EMAILS_REQUIRE_VERIFIED'>, user: AdminFacts): boolean {
  if (user.is_admin) return true;
  return isAdminEmail(config, user.email) && (user.email_verified || !config.ADMIN_EMAILS_REQUIRE_VERIFIED);
}
