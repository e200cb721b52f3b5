/**
 * Backend bearer-key check, exactly as §5: 500 `Server misconfigured` when INTERNAL_API_KEY is
 * unset; 401 `Unauthorized` for a missing header, a missing `Bearer ` prefix or an empty key;
 * 403 `Forbidden` when the key does not match (compared in constant time).
 * A callback hook, not an async one: the check is synchronous, and on the AI proxy's path every
 * promise a hook returns is one more microtask turn per request (docs/benchmarks.md "AI proxy").
 */

import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { secretMatcher } from '../../lib/crypto.ts';
import { AppError, forbidden, unauthorized } from '../../lib/errors.ts';
import { documented } from './openapi.ts';
import { BEARER_SECURITY } from './security.ts';

export function createBearerAuth(internalApiKey: string | undefined) {
  const matches = internalApiKey ? secretMatcher(internalApiKey) : undefined;
  const check = (header: string | undefined): Error | undefined => {
    if (!matches) return new AppError('SERVER_MISCONFIGURED', 'Server misconfigured');
    if (typeof header !== 'string' || !header.startsWith('Bearer ')) return unauthorized('Unauthorized');
    const key = header.slice('Bearer '.length).trim();
    if (!key) return unauthorized('Unauthorized');
    if (!matches(key)) return forbidden('Forbidden');
    return undefined;
  };
  return documented(
    function requireBearer(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
      done(check(request.headers.authorization));
    },
    { security: BEARER_SECURITY },
  );
}
