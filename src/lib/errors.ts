/**
 * The one error vocabulary (docs/architecture.md rule 3). Services throw AppError with a code from the
 * catalogue (./error-codes.ts); the central Fastify error handler writes `{ error, code?, ...extra }`
 * exactly as the specification's bodies say: `code` only for catalogue entries with a `body`.
 */
import { ERROR_CODES, type ErrorCode, type ErrorDefinition, type FixedTextCode, type WordedCode } from './error-codes.ts';

export type { ErrorCode } from './error-codes.ts';

export class AppError extends Error {
  override name = 'AppError';
  /** the catalogue name (logs, tests, the OpenAPI catalogue) */
  readonly id: ErrorCode;
  readonly status: number;
  /** the `code` field of the body, when the catalogue gives one */
  readonly code: string | undefined;
  readonly extra: Record<string, unknown> | undefined;

  /**
   * `status` overrides the catalogue's only where the same error has a different status by
   * route (the specification's web and backend agent limits) or is passed on from the backend.
   * A code with a fixed `error` text takes no message: the text is what clients match on, so a
   * call site's explanation goes in `extra.message` (the specification's gateway bodies).
   */
  constructor(id: FixedTextCode, message?: undefined, extra?: Record<string, unknown>, status?: number);
  constructor(id: WordedCode, message?: string, extra?: Record<string, unknown>, status?: number);
  constructor(id: ErrorCode, message?: string, extra?: Record<string, unknown>, status?: number) {
    const def: ErrorDefinition = ERROR_CODES[id];
    super(def.error ?? message ?? def.summary);
    this.id = id;
    this.status = status ?? def.status;
    this.code = def.body;
    this.extra = extra;
  }
}

export const badRequest = (message: string, extra?: Record<string, unknown>) => new AppError('BAD_REQUEST', message, extra);
export const unauthorized = (message = 'Unauthorized', extra?: Record<string, unknown>) => new AppError('UNAUTHORIZED', message, extra);
export const forbidden = (message = 'Forbidden', code: WordedCode = 'FORBIDDEN', extra?: Record<string, unknown>) =>
  new AppError(code, message, extra);
export const notFound = (message = 'Not found') => new AppError('NOT_FOUND', message);
export const conflict = (message: string) => new AppError('CONFLICT', message);
export const tooManyRequests = (message = 'Too many requests', extra?: Record<string, unknown>) =>
  new AppError('TOO_MANY_REQUESTS', message, extra);
export const serviceUnavailable = (message = 'Service unavailable', extra?: Record<string, unknown>) =>
  new AppError('SERVICE_UNAVAILABLE', message, extra);

export const isAppError = (e: unknown): e is AppError => e instanceof AppError;
