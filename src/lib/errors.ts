/**
 * The one error vocabulary (DESIGN rule 3). Services throw AppError; the central Fastify error
 * handler writes `{ error, code?, ...extra }` exactly as the specification's bodies say.
 */
export class AppError extends Error {
  override name = 'AppError';
  readonly status: number;
  readonly code: string | undefined;
  readonly extra: Record<string, unknown> | undefined;

  constructor(status: number, code: string | undefined, message: string, extra?: Record<string, unknown>) {
    super(message);
    this.status = status;
    this.code = code;
    this.extra = extra;
  }
}

export const badRequest = (message: string, extra?: Record<string, unknown>) =>
  new AppError(400, undefined, message, extra);
export const unauthorized = (message = 'Unauthorized', extra?: Record<string, unknown>) =>
  new AppError(401, undefined, message, extra);
export const forbidden = (message = 'Forbidden', code?: string, extra?: Record<string, unknown>) =>
  new AppError(403, code, message, extra);
export const notFound = (message = 'Not found') => new AppError(404, undefined, message);
export const conflict = (message: string) => new AppError(409, undefined, message);
export const tooManyRequests = (message = 'Too many requests', extra?: Record<string, unknown>) =>
  new AppError(429, undefined, message, extra);

export const serviceUnavailable = (message = 'Service unavailable', extra?: Record<string, unknown>) =>
  new AppError(503, undefined, message, extra);

export const isAppError = (e: unknown): e is AppError => e instanceof AppError;
