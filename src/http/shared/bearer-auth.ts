/**
 * Backend bearer-key check, exactly as §5: 500 `Server misconfigured` when INTERNAL_API_KEY is
 * unset; 401 `Unauthorized` for a missing header, a missing `Bearer ` prefix or an empty key;
 * 403 `Forbidden` when the key does not match (compared in constant time).
 */

import type { FastifyRequest } from 'fastify';
import { secretMatcher } from '../../lib/crypto.ts';
import { AppError, forbidden, unauthorized } from '../../lib/errors.ts';
import { documented } from './openapi.ts';
import { BEARER_SECURITY } from './security.ts';

export function createBearerAuth(internalApiKey: string | undefined) {
  const matches = internalApiKey ? secretMatcher(internalApiKey) : undefined;
  return documented(
    async function requireBearer(request: FastifyRequest): Promise<void> {
      if (!matches) throw new AppError('SERVER_MISCONFIGURED', 'Server misconfigured');
      const header = request.headers.authorization;
      if (typeof header !== 'string' || !header.startsWith('Bearer ')) throw unauthorized('Unauthorized');
      const key = header.slice('Bearer '.length).trim();
      if (!key) throw unauthorized('Unauthorized');
      if (!matches(key)) throw forbidden('Forbidden');
    },
    { security: BEARER_SECURITY },
  );
}
