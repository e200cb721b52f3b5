/**
 * The one error handler (docs/architecture.md rule 3). Every error leaves as JSON `{ error, code?, ...extra }`:
 * AppError as the service wrote it; validation and parser errors as 400; anything unexpected as
 * a generic 500 whose detail stays in the log next to the request id. What no service raised is
 * named by a catalogue code here too, and every error body the handler writes goes through `sendError`.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { isDatabaseUnavailable, isUnstorableText } from '../../db/errors.ts';
import { AppError, badRequest, isAppError, notFound as notFoundError, serviceUnavailable } from '../../lib/errors.ts';

/** Fastify's own 4xx codes we rewrite: the specification wants 400 for body problems. */
const AS_BAD_REQUEST = new Set([
  'FST_ERR_CTP_INVALID_MEDIA_TYPE', // unknown content type
  'FST_ERR_CTP_INVALID_CONTENT_LENGTH',
  'FST_ERR_CTP_EMPTY_JSON_BODY',
  'FST_ERR_CTP_INVALID_JSON_BODY',
]);

/** The catalogue's "not configured" errors (§7): settings the operator left unset, named in the code. */
const isNotConfigured = (err: AppError) => err.id.endsWith('_NOT_CONFIGURED');

/**
 * Writes an AppError as the specification's bodies are: `{ ...extra, error, code? }`, `code` only
 * for catalogue entries with a body code. For answers outside a thrown error (not-found handlers).
 */
export function sendError(reply: FastifyReply, err: AppError) {
  const body: Record<string, unknown> = { ...err.extra, error: err.message };
  if (err.code !== undefined) body.code = err.code;
  // a 429 that says when to come back says it in the standard header too (RFC 9110 §10.2.3)
  if (err.status === 429 && typeof err.extra?.retryAfter === 'number') reply.header('retry-after', String(err.extra.retryAfter));
  return reply.code(err.status).send(body);
}

/** The catalogue error for what no service raised: validation, the body parser, the framework. */
function frameworkError(err: FastifyError): AppError | undefined {
  if (hasZodFastifySchemaValidationErrors(err)) {
    const first = err.validation[0];
    const field = first?.instancePath?.replace(/^\//, '').replace(/\//g, '.');
    const message = first?.message ?? 'Invalid request';
    // messages we wrote in the schemas are complete sentences; generic zod ones get the field
    return badRequest(/^[A-Z]/.test(message) || !field ? message : `${field}: ${message}`);
  }
  if (err.validation) return badRequest(err.message);
  // Safety net for input no schema caught: text PostgreSQL cannot store (NUL bytes) is the
  // client's fault, not ours (§7: bad input is 4xx, never 5xx).
  if (isUnstorableText(err)) return badRequest('Invalid characters in input');
  const status = err.statusCode ?? 500;
  if (status >= 500) return undefined;
  if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return badRequest('Unsupported content type; send application/json');
  if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') return badRequest('Body is not valid JSON');
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new AppError('PAYLOAD_TOO_LARGE', 'Request body too large');
  return new AppError('REQUEST_REJECTED', err.message, undefined, err.code && AS_BAD_REQUEST.has(err.code) ? 400 : status);
}

export function registerErrorHandler(
  app: FastifyInstance,
  notFound: (request: FastifyRequest, reply: FastifyReply) => unknown = (_request, reply) => sendError(reply, notFoundError()),
): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    if (isAppError(err)) {
      // an integration that is not configured is an answer the operator chose, not a failure:
      // one calm line naming it, no stack trace (docs/configuration.md "Integrations not configured")
      if (isNotConfigured(err)) request.log.warn({ code: err.id, status: err.status }, err.message);
      // every 5xx leaves one line that says why, in its message (readable at a terminal) and in `err`
      else if (err.status >= 500) request.log.error({ err, code: err.id }, `request failed (${err.status} ${err.id}): ${err.message}`);
      return sendError(reply, err);
    }
    const known = frameworkError(err);
    if (known) return sendError(reply, known);
    // PostgreSQL down or restarting: a 503 the client may retry, logged as one line per request
    // without a stack (an outage would otherwise flood the log with identical traces)
    if (isDatabaseUnavailable(err)) {
      request.log.warn({ code: (err as { code?: string }).code, message: err.message }, 'database unavailable');
      return sendError(reply, serviceUnavailable('Database unavailable, try again shortly'));
    }
    request.log.error({ err }, `unhandled error (500): ${err.message}`);
    return sendError(reply, new AppError('UNEXPECTED', 'Internal server error'));
  });

  app.setNotFoundHandler(notFound);
}
