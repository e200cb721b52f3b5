/**
 * The backend's one acting-user resolver: every bearer-key route that acts for a user reads it the
 * same way (docs/routes.md lists the routes). `x-user-id` names the user (a UUID,
 * 400 `Invalid user id` otherwise); where a route allows it, `userId` in the body does the same;
 * with neither, the call acts as the built-in operator account, which owns what such calls create.
 */
import type { FastifyRequest } from 'fastify';
import { badRequest } from '../../lib/errors.ts';
import { UUID_PATTERN } from '../../lib/ids.ts';

/** The account bearer-key calls without a user act as (created by migration 040_operator_account.sql). */
export const OPERATOR_USER_ID = '00000000-0000-0000-0000-000000000001';

/** The acting user from `x-user-id` (or `bodyUserId` where the route allows it), else the operator account; 400 when malformed. */
export function actingUser(request: Pick<FastifyRequest, 'headers'>, bodyUserId?: string): string {
  const header = request.headers['x-user-id'];
  const value = typeof header === 'string' && header ? header : bodyUserId;
  if (!value) return OPERATOR_USER_ID;
  if (!UUID_PATTERN.test(value)) throw badRequest('Invalid user id');
  return value.toLowerCase();
}

/**
 * The user the call names in `x-user-id`, trimmed, unchecked; undefined without one. The AI layer
 * takes any value there as header context (§4.9: `anonymous` by default, a platform user's id
 * for their stored plan), so it reads the header through this and not through actingUser.
 */
export function namedUser(request: Pick<FastifyRequest, 'headers'>): string | undefined {
  const header = request.headers['x-user-id'];
  const value = typeof header === 'string' ? header.trim() : '';
  return value === '' ? undefined : value;
}

/** Whether the call names a user at all (the operator view lists every agent when it does not). */
export const namesUser = (request: Pick<FastifyRequest, 'headers'>): boolean => namedUser(request) !== undefined;
