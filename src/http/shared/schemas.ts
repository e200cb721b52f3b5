/** Small zod building blocks shared by route schemas. */
import { z } from 'zod';
import { BODY_CODES, ERROR_TEXT_CODES } from '../../lib/error-codes.ts';

/** A JSON object body; a missing or non-object body gets this message. */
export const jsonBody = <T extends z.ZodRawShape>(shape: T) => z.object(shape, { error: 'Request body must be a JSON object' });

/**
 * `{ error }` (plus optional code) as every error response has it. The catalogue's public
 * identifiers are listed, not enforced as an enum: the response serializer must never turn an
 * error into a 500, and most `error` values are free text.
 */
export const errorSchema = z
  .object({
    error: z
      .string()
      .describe(`A human-readable message, except these fixed identifiers (then \`message\` explains): ${ERROR_TEXT_CODES.join(', ')}`),
    code: z
      .string()
      .optional()
      .describe(`One of: ${BODY_CODES.join(', ')} (the catalogue with statuses is \`x-error-codes\` at the top of this document)`),
  })
  .loose()
  .describe('Error: `error` is a human-readable message; `code` a stable identifier where the specification names one');

/** The error answers a route documents, `errorSchema` under each status: `{ 200: answer, ...errorResponses(400, 404) }`. */
export const errorResponses = <const S extends number>(...statuses: S[]) =>
  Object.fromEntries(statuses.map((status) => [status, errorSchema])) as Record<S, typeof errorSchema>;

export const okSchema = z.object({ ok: z.literal(true) });

/**
 * Request headers a route reads, for validation-free documentation: every header stays (loose),
 * each listed one is an optional string; the route checks the values itself.
 */
export const documentedHeaders = (headers: Record<string, string>) =>
  z.object(Object.fromEntries(Object.entries(headers).map(([name, text]) => [name, z.string().optional().describe(text)]))).loose();

/** A request header a route reads (documented with documentedHeaders): its value trimmed, or undefined when absent or repeated. */
export const headerText = (request: { headers: Record<string, string | string[] | undefined> }, name: string) => {
  const v = request.headers[name];
  return typeof v === 'string' ? v.trim() : undefined;
};
