/**
 * Backend bearer-key check, exactly as §5: 500 `Server misconfigured` when INTERNAL_API_KEY is
 * unset; 401 `Unauthorized` for a missing header, a missing `Bearer ` prefix or an empty key;
 * 403 `Forbidden` when the key does not match (compared in constant time).
 */
import type { FastifyRequest } from 'fastify';
import { safeEqual } from '../../lib/crypto.ts';
import { AppError, forbidden, unauthorized } from '../../lib/errors.ts';
import { documented } from './openapi.ts';

export function createBearerAuth(internalApiKey: string | undefined) {
  return documented(
    async function requireBearer(request: FastifyRequest): Promise<void> {
      if (!internalApiKey) throw new AppError('SERVER_MISCONFIGURED', 'Server misconfigured');
      const header = request.headers.authorization;
      if (typeof header !== 'string' || !header.startsWith('Bearer ')) throw unauthorized('Unauthorized');
      const key = header.slice('Bearer '.length).trim();
      if (!key) throw unauthorized('Unauthorized');
      if (!safeEqual(key, internalApiKey)) throw forbidden('Forbidden');
    },
    { security: [{ bearerKey: [] }] },
  );
}
