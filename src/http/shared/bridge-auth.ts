/**
 * Bridge secret check (§5, §4.13): `x-bridge-secret` must equal BRIDGE_SECRET, compared in
 * constant time; 401 `{error:'unauthorized'}` otherwise. The specification turns the check off
 * when BRIDGE_SECRET is unset; we do not: an unset secret means the bridge is closed (503
 * `Bridge not configured`), because an open bus lets anyone post as the operator and read and
 * consume agents' messages (docs/security.md).
 */
import type { FastifyRequest } from 'fastify';
import { safeEqual } from '../../lib/crypto.ts';
import { AppError } from '../../lib/errors.ts';
import { documented } from './openapi.ts';
import { BRIDGE_SECURITY } from './security.ts';

export const BRIDGE_SECRET_HEADER = 'x-bridge-secret';
export const BRIDGE_NOT_CONFIGURED = 'Bridge not configured';

export function createBridgeAuth(secret: string | undefined) {
  return documented(
    async function requireBridgeSecret(request: FastifyRequest): Promise<void> {
      if (secret === undefined) throw new AppError('BRIDGE_NOT_CONFIGURED', BRIDGE_NOT_CONFIGURED);
      const given = request.headers[BRIDGE_SECRET_HEADER];
      if (typeof given !== 'string' || !safeEqual(given, secret)) throw new AppError('UNAUTHORIZED', 'unauthorized');
    },
    { security: BRIDGE_SECURITY },
  );
}
