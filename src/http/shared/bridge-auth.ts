/**
 * Bridge secret check (§5, §4.13): `x-bridge-secret` must equal BRIDGE_SECRET, compared in
 * constant time; 401 `{error:'unauthorized'}` otherwise. With BRIDGE_SECRET unset the check is
 * off (development), as the specification says.
 */
import type { FastifyRequest } from 'fastify';
import { safeEqual } from '../../lib/crypto.ts';
import { AppError } from '../../lib/errors.ts';

export const BRIDGE_SECRET_HEADER = 'x-bridge-secret';

export function createBridgeAuth(secret: string | undefined) {
  return async function requireBridgeSecret(request: FastifyRequest): Promise<void> {
    if (secret === undefined) return;
    const given = request.headers[BRIDGE_SECRET_HEADER];
    if (typeof given !== 'string' || !safeEqual(given, secret)) throw new AppError(401, undefined, 'unauthorized');
  };
}
